// The pickle's storage classes (torch.FloatStorage, ...) and their dtypes, which the reader
// (torch_file.cpp) and the writer (torch_file_write.cpp) share. Internal to lib/models.
#pragma once

#include <c10/core/ScalarType.h>

#include <map>
#include <string>

namespace libreyolo::models {

inline const std::map<std::string, at::ScalarType>& storage_types() {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat},     {"torch.DoubleStorage", at::kDouble}, {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16}, {"torch.LongStorage", at::kLong},   {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},     {"torch.CharStorage", at::kChar},     {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool},       {"torch.ComplexFloatStorage", at::kComplexFloat},
      {"torch.ComplexDoubleStorage", at::kComplexDouble}};
  return types;
}

}  // namespace libreyolo::models
