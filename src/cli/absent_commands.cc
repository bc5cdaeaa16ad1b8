// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// The commands of modules this build left out because their libraries were
// not found (cmake/JouleDependencies.cmake: a pip install builds the core
// only). They stay on the command line, so `joule serve --help` still
// describes them, and running one says what is missing and how to get it.
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "cli/absent_modules.h"
#include "cli/commands.h"
#include "joule/error.h"

namespace joule::cli {
namespace {

// `reason` comes from CMake (absent_modules.h): "needs X, not found when this
// joule was built" or "was switched off ...".
[[noreturn]] [[maybe_unused]] void absent(std::string_view command, std::string_view module, std::string_view reason) {
  throw Error(fmt::format(
      "'joule {}' is not in this build: {} {}. The Debian package of joule has it; or build joule from its "
      "source with its libraries (docs/install.md)",
      command, module, reason));
}

}  // namespace

#ifndef JOULE_HAVE_SERVICE
int run_serve(const ServeCliOptions&) { absent("serve", "the batch-size service", absent_reason::kService); }
int run_tokens(const TokensCliOptions&) { absent("tokens", "the batch-size service", absent_reason::kService); }
int run_jobs(const JobsCliOptions&) { absent("jobs", "the batch-size service", absent_reason::kService); }
RemoteZeusFactory service_zeus_factory(const std::string&) {
  absent("simulate --service", "the batch-size service's client", absent_reason::kService);
}
#endif

#ifndef JOULE_HAVE_EXPORTER
int run_exporter(const CommonOptions&, const ExporterCliOptions&) {
  absent("exporter", "the exporter's HTTP endpoint", absent_reason::kExporter);
}
int run_slurm_epilog(const SlurmEpilogCliOptions&) {
  absent("slurm-epilog", "the exporter's HTTP client", absent_reason::kExporter);
}
#endif

}  // namespace joule::cli
