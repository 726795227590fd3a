// Image files: header reads for the label scan and full decodes for training. JPEG goes
// through libjpeg-turbo (with DCT scaling when the target is at most half the source), other
// formats through OpenCV's imgcodecs where the build has it (meson option imgcodecs); EXIF
// orientation is honoured in both sizes and pixels. Writing: JPEG through libjpeg-turbo, other
// formats through imgcodecs.
#pragma once

#include <opencv2/core/mat.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace libreyolo::data {

struct ImageInfo {
  int width = 0;   // as displayed, i.e. after EXIF orientation
  int height = 0;
  int orientation = 1;    // EXIF orientation tag, 1 = upright
  std::string format;     // "jpeg", "png", or OpenCV's decode for anything else
  bool truncated = false; // JPEG without its end marker: decodes as far as it goes
};

// Thrown for a file that is not a readable image; the message is the reason users see.
class CorruptImage : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path);

// PIL's MAX_IMAGE_PIXELS: a larger image is refused (a decompression bomb, or a photo that wants
// resizing) wherever it is decoded, from its header, before its pixels are: the scan's check alone
// would let an image replaced after the scan (same size and time) through the label cache.
inline constexpr std::int64_t kMaximumPixels = 89478485;
// Throws CorruptImage for a width x height over kMaximumPixels.
void check_pixel_limit(std::int64_t width, std::int64_t height);

// Reads enough of the file to know its size and orientation. Throws CorruptImage.
ImageInfo read_image_info(const std::filesystem::path& path);

// Decodes to 8-bit BGR, upright (`upright` false: as stored, the EXIF orientation ignored, as
// PIL's open without exif_transpose). With `target_long_side` > 0 a JPEG may be decoded at 1/2,
// 1/4 or 1/8 scale, never below that long side. Throws CorruptImage.
cv::Mat decode_image(const std::filesystem::path& path, int target_long_side = 0, bool upright = true);
cv::Mat decode_image_bytes(const std::vector<std::uint8_t>& bytes, int target_long_side = 0, bool upright = true);

// As stored (no EXIF rotation), a JPEG at the smallest DCT scale (1/8 to 1) whose size covers
// `cover(full size)` in both sides; other formats at full size (and `cover` still called once).
// `full` receives the size at scale 1 (the image's stored size). Throws CorruptImage.
cv::Mat decode_stored_covering(const std::vector<std::uint8_t>& bytes, const std::function<cv::Size(cv::Size)>& cover,
                               cv::Size& full);

// False in a build without OpenCV's imgcodecs: then only JPEG files are read and written.
bool reads_all_formats();

// Encodes an 8-bit BGR (or grey) image in the format of `extension` (".jpg", ".jpeg", ".png",
// ...). Returns no bytes for a format this build cannot write.
std::vector<std::uint8_t> encode_image(const cv::Mat& image, const std::string& extension, int jpeg_quality = 90);

// EXIF orientation of a JPEG (1 when absent or unreadable).
int jpeg_exif_orientation(const std::uint8_t* data, std::size_t size);

// Rotates/flips `image` so an EXIF `orientation` becomes upright.
cv::Mat apply_orientation(const cv::Mat& image, int orientation);

}  // namespace libreyolo::data
