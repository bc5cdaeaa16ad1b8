/* SPDX-FileCopyrightText: 2026 the joule developers
   SPDX-License-Identifier: Apache-2.0

   The table through which C++ built apart from joule records a concurrent
   region's edges in a joule.torch session: the DDP communication hook that
   joule.torch compiles against the user's PyTorch at first use
   (comm_hook.cc beside this file). Plain C, so the two sides share no C++
   ABI: joule._joule fills the table (joule._joule.ConcurrentEdges), the hook
   finds it in a capsule of this name. */
#ifndef JOULE_CONCURRENT_EDGES_H
#define JOULE_CONCURRENT_EDGES_H

#include <stddef.h>

#define JOULE_CONCURRENT_EDGES_CAPSULE "joule._joule.concurrent_edges"
#define JOULE_CONCURRENT_EDGES_VERSION 1u

#ifdef __cplusplus
extern "C" {
#endif

typedef struct joule_concurrent_edges {
  unsigned version; /* JOULE_CONCURRENT_EDGES_VERSION */
  void* edges;      /* the session's clock, opaque: the first argument of begin and end */
  /* A call of concurrent region `region` begins (end: the earliest open call
     ends) on the calling thread's current stream or the host's clock, as the
     session's clock records. Any thread, without the GIL (taken inside
     where the clock needs it). 0 on success, else nonzero with a
     NUL-terminated message in error (cut to error_size bytes). */
  int (*begin)(void* edges, const char* region, char* error, size_t error_size);
  int (*end)(void* edges, const char* region, char* error, size_t error_size);
} joule_concurrent_edges;

#ifdef __cplusplus
}
#endif

#endif /* JOULE_CONCURRENT_EDGES_H */
