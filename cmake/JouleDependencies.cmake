# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
# Where joule's third-party code comes from (docs/install.md).
#
# The core (everything a training job and the `joule` CLI need) uses only
# header-only libraries, fmt and SQLite: each is taken from the system when found,
# and otherwise from third_party/, which a source distribution carries
# (scripts/collect-third-party.sh fills it from Debian's packages when the
# sdist is made; it is never committed). Either way the same target names
# (fmt::fmt, SQLite::SQLite3, ...) reach the rest of the build, so no other
# CMakeLists.txt knows where a library came from.
#
# JOULE_BUNDLED_DEPS=ON takes third_party/ even where the system has the
# library: the wheel and the sdist build that way, so what they link is what
# was tested, and nothing but libc, libstdc++, libm, libdl and pthreads.
#
# Modules with heavy dependencies (the service, the exporter's HTTP endpoint,
# MPI) are built only where those are found; configure says in one line what
# it left out and why, and the CLI answers their commands with the same.

set(JOULE_THIRD_PARTY_DIR ${PROJECT_SOURCE_DIR}/third_party CACHE PATH
    "the third-party sources a source distribution carries (scripts/collect-third-party.sh)")
option(JOULE_BUNDLED_DEPS "Use the third-party sources in JOULE_THIRD_PARTY_DIR even where the system has the library" OFF)

# joule_require_bundled(<dir> <what>): FATAL_ERROR naming <what> unless
# third_party/<dir> is there.
function(joule_require_bundled dir what)
  if(EXISTS ${JOULE_THIRD_PARTY_DIR}/${dir})
    return()
  endif()
  if(JOULE_BUNDLED_DEPS)
    message(FATAL_ERROR "joule needs ${what}: JOULE_BUNDLED_DEPS=ON takes it from ${JOULE_THIRD_PARTY_DIR}/${dir}, "
                        "which is not there (scripts/collect-third-party.sh fills third_party/ as a source distribution "
                        "carries it)")
  endif()
  message(FATAL_ERROR "joule needs ${what}: it was not found on this system, and ${JOULE_THIRD_PARTY_DIR}/${dir} "
                      "is not there either (a source distribution carries it; from a git checkout, install it: "
                      "scripts/install-deps.sh lists the Debian packages)")
endfunction()

# joule_header_library(<target> <dir>): an INTERFACE target named <target>
# (e.g. CLI11::CLI11) over third_party/<dir>/include.
function(joule_header_library target dir)
  string(REPLACE "::" "_" local joule_bundled_${target})
  add_library(${local} INTERFACE)
  target_include_directories(${local} SYSTEM INTERFACE ${JOULE_THIRD_PARTY_DIR}/${dir}/include)
  add_library(${target} ALIAS ${local})
endfunction()

# joule_dependency(<package> <target> <dir> <what> [FIND_ARGS ...]): the
# system's header-only <package> giving <target>, else third_party/<dir>.
macro(joule_dependency package target dir what)
  cmake_parse_arguments(dep "" "" "FIND_ARGS" ${ARGN})
  if(NOT JOULE_BUNDLED_DEPS)
    find_package(${package} ${dep_FIND_ARGS} QUIET)
  endif()
  if(JOULE_BUNDLED_DEPS OR NOT TARGET ${target})
    joule_require_bundled(${dir} "${what}")
    joule_header_library(${target} ${dir})
    list(APPEND JOULE_BUNDLED_USED ${dir})
  endif()
endmacro()

# joule_header_dir(<var> <header> <dir> <what>): <var> is the directory that
# holds <header>: the system's, else third_party/<dir>/include.
macro(joule_header_dir var header dir what)
  if(NOT JOULE_BUNDLED_DEPS)
    find_path(${var} ${header})
  endif()
  if(JOULE_BUNDLED_DEPS OR NOT ${var})
    joule_require_bundled(${dir} "${what}")
    set(${var} ${JOULE_THIRD_PARTY_DIR}/${dir}/include CACHE PATH "${header}'s directory" FORCE)
    list(APPEND JOULE_BUNDLED_USED ${dir})
  endif()
endmacro()

set(JOULE_BUNDLED_USED "")
# fmt: bundled, its compiled part (src/format.cc) is built once into a static
# library; header-only mode would compile it into every file that formats.
if(NOT JOULE_BUNDLED_DEPS)
  find_package(fmt QUIET)
endif()
if(JOULE_BUNDLED_DEPS OR NOT TARGET fmt::fmt)
  joule_require_bundled(fmt "fmt (Debian: libfmt-dev)")
  add_library(joule_bundled_fmt STATIC ${JOULE_THIRD_PARTY_DIR}/fmt/src/format.cc)
  target_include_directories(joule_bundled_fmt SYSTEM PUBLIC ${JOULE_THIRD_PARTY_DIR}/fmt/include)
  set_target_properties(joule_bundled_fmt PROPERTIES POSITION_INDEPENDENT_CODE ON)
  add_library(fmt::fmt ALIAS joule_bundled_fmt)
  list(APPEND JOULE_BUNDLED_USED fmt)
endif()
joule_dependency(CLI11 CLI11::CLI11 cli11 "CLI11 (Debian: libcli11-dev)")
joule_dependency(nlohmann_json nlohmann_json::nlohmann_json nlohmann_json "nlohmann-json (Debian: nlohmann-json3-dev)"
                 FIND_ARGS 3.10)
joule_dependency(tomlplusplus tomlplusplus::tomlplusplus tomlplusplus "toml++ (Debian: libtomlplusplus-dev)")
# The least-squares fits of energy attribution (header-only).
joule_dependency(Eigen3 Eigen3::Eigen eigen3 "Eigen 3 (Debian: libeigen3-dev)" FIND_ARGS 3.3 NO_MODULE)

# The optimizers' random generator (PCG, header-only): its state is three
# numbers, where std::mt19937_64's is 313, so a stored optimizer stays small.
joule_header_dir(PCG_INCLUDE_DIR pcg_random.hpp pcg "PCG (Debian: libpcg-cpp-dev)")

# ROCm SMI's header types the AMD backend's function table; the library
# itself is loaded at run time, never linked.
joule_header_dir(ROCM_SMI_INCLUDE_DIR rocm_smi/rocm_smi.h rocm_smi
                 "ROCm SMI's header rocm_smi/rocm_smi.h (Debian: librocm-smi-dev)")

# SQLite (sweep stores, the job store of joule serve): bundled, the
# amalgamation is compiled into joule itself.
if(NOT JOULE_BUNDLED_DEPS)
  find_package(SQLite3 QUIET)
endif()
if(JOULE_BUNDLED_DEPS OR NOT TARGET SQLite::SQLite3)
  joule_require_bundled(sqlite3 "SQLite 3 (Debian: libsqlite3-dev)")
  enable_language(C)
  add_library(joule_bundled_sqlite3 STATIC ${JOULE_THIRD_PARTY_DIR}/sqlite3/sqlite3.c)
  target_include_directories(joule_bundled_sqlite3 SYSTEM PUBLIC ${JOULE_THIRD_PARTY_DIR}/sqlite3)
  # Serialised threading as Debian builds it; no extension loading (joule
  # loads none), so no dlopen of user-given paths; no double-quoted strings
  # taken as identifiers.
  target_compile_definitions(joule_bundled_sqlite3 PRIVATE SQLITE_THREADSAFE=1 SQLITE_OMIT_LOAD_EXTENSION=1 SQLITE_DQS=0)
  set_target_properties(joule_bundled_sqlite3 PROPERTIES C_VISIBILITY_PRESET hidden POSITION_INDEPENDENT_CODE ON)
  target_compile_options(joule_bundled_sqlite3 PRIVATE -w)  # third-party code: its warnings are not ours to fix
  target_link_libraries(joule_bundled_sqlite3 PRIVATE Threads::Threads m)
  add_library(SQLite::SQLite3 ALIAS joule_bundled_sqlite3)
  list(APPEND JOULE_BUNDLED_USED sqlite3)
endif()

if(JOULE_BUNDLED_USED)
  string(REPLACE ";" ", " used "${JOULE_BUNDLED_USED}")
  message(STATUS "joule: third-party code from ${JOULE_THIRD_PARTY_DIR}: ${used}")
endif()

# ------------------------------------------------------- optional modules
# Each is built where its libraries are found, unless switched off (the
# prebuilt wheel switches them all off: it links nothing from the system).
option(JOULE_WITH_SERVICE "Build the batch-size service where Boost, cpp-httplib, libpqxx and OpenSSL are found" ON)
option(JOULE_WITH_EXPORTER "Build joule exporter's HTTP endpoint where cpp-httplib is found" ON)
option(JOULE_WITH_MPI "Build the MPI parts where an MPI is found (e.g. Debian's libopenmpi-dev)" ON)
option(JOULE_WITH_KUBELET "Build the exporter's Kubernetes pod labels where gRPC, protobuf and protoc are found" ON)

# joule_optional_module(<wish> <result> <name> <commands> [TESTS_NEED] MISSING <list>):
# <result> (a normal variable: a later configure looks again) is ON when the
# option <wish> is ON and <list> is empty; otherwise OFF, with one line saying
# what is left out and why, and in <result>_MISSING the reason the CLI's
# answer gives. TESTS_NEED: a test build stops instead.
function(joule_optional_module wish result name commands)
  cmake_parse_arguments(arg "TESTS_NEED" "" "MISSING" ${ARGN})
  if(NOT ${wish})
    set(why "switched off (-D${wish}=OFF)")
    set(${result}_MISSING "was switched off when this joule was built (-D${wish}=OFF; the prebuilt wheel links nothing from the system)" PARENT_SCOPE)
  elseif(arg_MISSING)
    string(REPLACE ";" ", " missing "${arg_MISSING}")
    set(why "not found: ${missing}")
    set(${result}_MISSING "needs ${missing}, not found when this joule was built" PARENT_SCOPE)
  else()
    set(${result} ON PARENT_SCOPE)
    return()
  endif()
  if(JOULE_BUILD_TESTS AND arg_TESTS_NEED)
    message(FATAL_ERROR "joule: the tests need ${name} (${commands}); ${why} "
                        "(scripts/install-deps.sh installs them; -DJOULE_BUILD_TESTS=OFF builds without)")
  endif()
  message(STATUS "joule: leaving out ${name} (${commands}); ${why}")
  set(${result} OFF PARENT_SCOPE)
endfunction()

find_package(PkgConfig QUIET)
set(http_missing "")
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(NOT TARGET PkgConfig::HTTPLIB)
  list(APPEND http_missing "cpp-httplib (Debian: libcpp-httplib-dev)")
endif()

# The batch-size service: Boost.Beast serves, cpp-httplib is its client,
# libpqxx its PostgreSQL store, OpenSSL hashes its tokens.
set(service_missing ${http_missing})
if(JOULE_WITH_SERVICE)
  find_package(Boost 1.74 QUIET)
  if(NOT Boost_FOUND)
    list(APPEND service_missing "Boost >= 1.74 (Debian: libboost-dev)")
  endif()
  find_package(OpenSSL QUIET COMPONENTS Crypto)
  if(NOT TARGET OpenSSL::Crypto)
    list(APPEND service_missing "OpenSSL (Debian: libssl-dev)")
  endif()
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PQXX QUIET IMPORTED_TARGET libpqxx)
  endif()
  if(NOT TARGET PkgConfig::PQXX)
    list(APPEND service_missing "libpqxx (Debian: libpqxx-dev)")
  endif()
endif()
joule_optional_module(JOULE_WITH_SERVICE JOULE_BUILDS_SERVICE "the batch-size service"
                      "joule serve, joule tokens, joule jobs" TESTS_NEED MISSING ${service_missing})
joule_optional_module(JOULE_WITH_EXPORTER JOULE_BUILDS_EXPORTER "the exporter's HTTP endpoint" "joule exporter"
                      TESTS_NEED MISSING ${http_missing})

# Kubernetes pod labels (joule exporter --kubelet-socket): the kubelet's
# PodResources API over gRPC, its client generated by protoc.
set(kubelet_missing "")
if(JOULE_WITH_KUBELET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(GRPCPP QUIET IMPORTED_TARGET grpc++ protobuf)
  endif()
  find_program(JOULE_PROTOC protoc)
  find_program(JOULE_GRPC_CPP_PLUGIN grpc_cpp_plugin)
  if(NOT TARGET PkgConfig::GRPCPP)
    list(APPEND kubelet_missing "gRPC and protobuf (Debian: libgrpc++-dev libprotobuf-dev)")
  endif()
  if(NOT JOULE_PROTOC OR NOT JOULE_GRPC_CPP_PLUGIN)
    list(APPEND kubelet_missing "protoc and its gRPC plugin (Debian: protobuf-compiler protobuf-compiler-grpc)")
  endif()
endif()
joule_optional_module(JOULE_WITH_KUBELET JOULE_BUILDS_KUBELET "the kubelet's pod resources (gRPC)"
                      "joule exporter --kubelet-socket" TESTS_NEED MISSING ${kubelet_missing})

# Measuring a job on every node (joule measure --mpi, joule::cluster::MpiMonitor).
set(mpi_missing "")
if(JOULE_WITH_MPI)
  enable_language(C)  # FindMPI probes its C interface with the C compiler
  find_package(MPI QUIET COMPONENTS C)
  if(NOT MPI_C_FOUND)
    set(mpi_missing "an MPI (Debian: libopenmpi-dev)")
  endif()
endif()
joule_optional_module(JOULE_WITH_MPI JOULE_BUILDS_MPI "MPI" "joule measure --mpi" MISSING ${mpi_missing})
