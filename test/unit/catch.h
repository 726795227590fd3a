// Catch2 v2 (Debian) and v3 (wrap fallback) both work with our tests through this header.
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
