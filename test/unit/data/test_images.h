// Helpers for data tests: write small real images (and broken ones) into a temporary folder.
#pragma once

#include "data/image_io.h"

#include <opencv2/core.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace test_images {

inline std::filesystem::path fresh_folder(const std::string& tag) {
  const auto path = std::filesystem::temp_directory_path() / ("libreyolo_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A gradient so that orientation and scaling are visible in the pixels.
inline cv::Mat gradient(int width, int height) {
  cv::Mat image(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      image.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<std::uint8_t>(255 * x / std::max(1, width - 1)),
                                            static_cast<std::uint8_t>(255 * y / std::max(1, height - 1)), 64);
    }
  }
  return image;
}

inline std::vector<std::uint8_t> jpeg_bytes(const cv::Mat& image, int quality = 95) {
  return libreyolo::data::encode_image(image, ".jpg", quality);
}

// Inserts an APP1 Exif segment (big-endian TIFF, one IFD entry: Orientation) after SOI.
inline std::vector<std::uint8_t> with_exif_orientation(const std::vector<std::uint8_t>& jpeg, int orientation) {
  const std::vector<std::uint8_t> tiff = {'M', 'M', 0, 42, 0, 0, 0, 8,                         // header, IFD at 8
                                          0, 1,                                                // one entry
                                          0x01, 0x12, 0, 3, 0, 0, 0, 1,                        // Orientation, SHORT, 1
                                          0, static_cast<std::uint8_t>(orientation), 0, 0,     // value
                                          0, 0, 0, 0};                                         // next IFD
  const std::size_t length = 2 + 6 + tiff.size();  // the APP1 length counts itself, "Exif\0\0" and the TIFF
  std::vector<std::uint8_t> out{0xFF, 0xD8, 0xFF, 0xE1, static_cast<std::uint8_t>(length >> 8),
                                static_cast<std::uint8_t>(length & 0xFF), 'E', 'x', 'i', 'f', 0, 0};
  // byte by byte: GCC 12's -Wstringop-overflow misreads the range inserts here (a false positive under -Werror)
  for (const std::uint8_t byte : tiff) out.push_back(byte);
  for (std::size_t i = 2; i < jpeg.size(); ++i) out.push_back(jpeg[i]);
  return out;
}

}  // namespace test_images
