// Catch2 v2 (Debian) and v3 (wrap fallback) both work with our tests through this header.
// Include it LAST: LibTorch's glog-style logging header defines its own CHECK(), which would
// silently replace Catch's (assertions that are never counted). This header takes CHECK back.
#pragma once

#ifdef CHECK
#undef CHECK
#endif

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
