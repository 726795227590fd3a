// Catch2 v2 runner (v3 links catch2-with-main instead).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
