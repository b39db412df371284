// TORCHXD_CHECK(cond): aborts with file:line when an invariant is broken.
// Never used for user input: bad input is an Error value (core/result.h).
#ifndef TORCHXD_CORE_CHECK_H_
#define TORCHXD_CORE_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define TORCHXD_CHECK(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#endif  // TORCHXD_CORE_CHECK_H_
