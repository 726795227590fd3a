// Precompiled header for the library: the LibTorch headers most files pull in are the bulk
// of every compile on 2 cores.

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <string>
#include <vector>
