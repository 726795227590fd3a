#include "data/image_io.h"

#include "build_config.h"

// JPEG-only: a build without imgcodecs (meson -Dimgcodecs=disabled), or this file compiled with
// LIBREYOLO_JPEG_ONLY (test/meson.build does, so that every build runs that branch's tests).
#if LIBREYOLO_HAVE_IMGCODECS && !defined(LIBREYOLO_JPEG_ONLY)
#define LIBREYOLO_READS_ALL_FORMATS 1
#else
#define LIBREYOLO_READS_ALL_FORMATS 0
#endif

#include <fmt/format.h>
#include <opencv2/core.hpp>
#if LIBREYOLO_READS_ALL_FORMATS
#include <opencv2/imgcodecs.hpp>
#include <tiffio.h>
#include <webp/decode.h>
#endif
#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>

namespace libreyolo::data {

namespace fs = std::filesystem;

namespace {

bool is_jpeg(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

bool is_png(const std::vector<std::uint8_t>& bytes) {
  static constexpr std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return bytes.size() >= 24 && std::equal(kSignature, kSignature + 8, bytes.begin());
}

bool has_jpeg_end_marker(const std::vector<std::uint8_t>& bytes) {
  // Some writers pad after EOI; look at the last few bytes.
  const std::size_t start = bytes.size() > 16 ? bytes.size() - 16 : 0;
  for (std::size_t i = bytes.size(); i-- > start + 1;) {
    if (bytes[i - 1] == 0xFF && bytes[i] == 0xD9) return true;
  }
  return false;
}

struct TurboHandle {
  tjhandle handle;
  explicit TurboHandle(tjhandle created) : handle(created) {}
  TurboHandle(const TurboHandle&) = delete;
  TurboHandle& operator=(const TurboHandle&) = delete;
  ~TurboHandle() {
    if (handle != nullptr) tjDestroy(handle);
  }
};

// One decompressor per thread: creating one costs more than decoding a small image header.
tjhandle thread_decompressor() {
  thread_local TurboHandle turbo(tjInitDecompress());
  if (turbo.handle == nullptr) throw CorruptImage("libjpeg-turbo could not be initialised");
  return turbo.handle;
}

tjhandle thread_compressor() {
  thread_local TurboHandle turbo(tjInitCompress());
  if (turbo.handle == nullptr) throw std::runtime_error("libjpeg-turbo's compressor could not be initialised");
  return turbo.handle;
}

std::vector<std::uint8_t> encode_jpeg(const cv::Mat& image, int quality) {
  if (image.empty() || image.depth() != CV_8U || (image.channels() != 3 && image.channels() != 1)) return {};
  const cv::Mat pixels = image.isContinuous() ? image : image.clone();
  const bool grey = pixels.channels() == 1;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  // 4:2:0 and the accurate DCT: the bytes OpenCV's imencode writes (TurboJPEG's default is the fast DCT)
  const int failed = tjCompress2(thread_compressor(), pixels.data, pixels.cols, 0, pixels.rows, grey ? TJPF_GRAY : TJPF_BGR,
                                 &buffer, &size, grey ? TJSAMP_GRAY : TJSAMP_420, std::clamp(quality, 1, 100),
                                 TJFLAG_ACCURATEDCT);
  std::vector<std::uint8_t> bytes;
  if (failed == 0) bytes.assign(buffer, buffer + size);
  tjFree(buffer);
  return bytes;
}

std::uint32_t read_u32(const std::uint8_t* p, bool little) {
  return little ? (p[0] | p[1] << 8 | p[2] << 16 | static_cast<std::uint32_t>(p[3]) << 24)
                : (static_cast<std::uint32_t>(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]);
}

std::uint16_t read_u16(const std::uint8_t* p, bool little) {
  return static_cast<std::uint16_t>(little ? (p[0] | p[1] << 8) : (p[0] << 8 | p[1]));
}

// Orientation 5-8 swap width and height.
bool swaps_axes(int orientation) { return orientation >= 5 && orientation <= 8; }

// `cover(full size)`: the size the decode must cover in both sides (a side of 0: any); the smallest
// DCT scale (1/8 to 1) that covers it is decoded.
cv::Mat decode_jpeg(const std::vector<std::uint8_t>& bytes, const std::function<cv::Size(cv::Size)>& cover, bool upright) {
  tjhandle handle = thread_decompressor();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height,
                          &subsampling, &colorspace) != 0) {
    throw CorruptImage(fmt::format("unreadable JPEG header: {}", tjGetErrorStr2(handle)));
  }
  check_pixel_limit(width, height);
  int scaled_width = width;
  int scaled_height = height;
  const cv::Size needed = cover ? cover({width, height}) : cv::Size(width, height);
  if (needed.width < width || needed.height < height) {
    int count = 0;
    const tjscalingfactor* factors = tjGetScalingFactors(&count);
    for (int i = 0; i < count; ++i) {
      const tjscalingfactor factor = factors[i];
      if (factor.num > factor.denom) continue;  // never upsample in the decoder
      const int w = TJSCALED(width, factor);
      const int h = TJSCALED(height, factor);
      if (w >= needed.width && h >= needed.height && w * h < scaled_width * scaled_height) {
        scaled_width = w;
        scaled_height = h;
      }
    }
  }
  cv::Mat image(scaled_height, scaled_width, CV_8UC3);
  if (tjDecompress2(handle, bytes.data(), static_cast<unsigned long>(bytes.size()), image.data, scaled_width, 0,
                    scaled_height, TJPF_BGR, 0) != 0) {
    // A warning (e.g. premature end of data) still leaves a usable, partly grey image.
    if (tjGetErrorCode(handle) != TJERR_WARNING) {
      throw CorruptImage(fmt::format("JPEG decode failed: {}", tjGetErrorStr2(handle)));
    }
  }
  return upright ? apply_orientation(image, jpeg_exif_orientation(bytes.data(), bytes.size())) : image;
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary | std::ios::ate);
  if (!stream) throw CorruptImage(fmt::format("cannot open {}", path.string()));
  const auto size = static_cast<std::size_t>(stream.tellg());
  std::vector<std::uint8_t> bytes(size);
  stream.seekg(0);
  stream.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!stream) throw CorruptImage(fmt::format("cannot read {}", path.string()));
  return bytes;
}

int jpeg_exif_orientation(const std::uint8_t* data, std::size_t size) {
  std::size_t pos = 2;  // after SOI
  while (pos + 4 <= size && data[pos] == 0xFF) {
    const std::uint8_t marker = data[pos + 1];
    if (marker == 0xD9 || marker == 0xDA) break;  // end of image / start of scan: no more headers
    const std::size_t length = read_u16(data + pos + 2, false);
    if (length < 2 || pos + 2 + length > size) break;
    const std::uint8_t* segment = data + pos + 4;
    const std::size_t segment_size = length - 2;
    if (marker == 0xE1 && segment_size >= 14 && std::equal(segment, segment + 6, "Exif\0\0")) {
      const std::uint8_t* tiff = segment + 6;
      const std::size_t tiff_size = segment_size - 6;
      const bool little = tiff[0] == 'I' && tiff[1] == 'I';
      if (!little && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
      const std::uint32_t ifd = read_u32(tiff + 4, little);
      if (ifd + 2 > tiff_size) return 1;
      const std::uint16_t entries = read_u16(tiff + ifd, little);
      for (std::uint16_t i = 0; i < entries; ++i) {
        const std::size_t entry = ifd + 2 + 12u * i;
        if (entry + 12 > tiff_size) return 1;
        if (read_u16(tiff + entry, little) == 0x0112) {
          const int value = read_u16(tiff + entry + 8, little);
          return value >= 1 && value <= 8 ? value : 1;
        }
      }
      return 1;
    }
    pos += 2 + length;
  }
  return 1;
}

cv::Mat apply_orientation(const cv::Mat& image, int orientation) {
  cv::Mat out;
  switch (orientation) {
    case 2: cv::flip(image, out, 1); return out;
    case 3: cv::rotate(image, out, cv::ROTATE_180); return out;
    case 4: cv::flip(image, out, 0); return out;
    case 5: cv::transpose(image, out); return out;
    case 6: cv::rotate(image, out, cv::ROTATE_90_CLOCKWISE); return out;
    case 7: cv::transpose(image, out); cv::rotate(out, out, cv::ROTATE_180); return out;
    case 8: cv::rotate(image, out, cv::ROTATE_90_COUNTERCLOCKWISE); return out;
    default: return image;
  }
}

void check_pixel_limit(std::int64_t width, std::int64_t height) {
  if (width * height <= kMaximumPixels) return;
  throw CorruptImage(fmt::format("{}x{} = {} pixels, over the {}-pixel limit (PIL's MAX_IMAGE_PIXELS): a decompression "
                                 "bomb, or an image to resize",
                                 width, height, width * height, kMaximumPixels));
}

namespace {

using Size = std::pair<std::int64_t, std::int64_t>;

#if LIBREYOLO_READS_ALL_FORMATS
// libtiff over bytes in memory: the first directory's ImageWidth and ImageLength (TIFF, BigTIFF and
// DNG), read by libtiff's own parser without decoding a strip.
struct TiffBytes {
  const std::vector<std::uint8_t>& bytes;
  std::uint64_t position = 0;
};

std::optional<Size> tiff_size(const std::vector<std::uint8_t>& bytes) {
  static const bool silenced = [] {  // the caller reports; libtiff would print to stderr
    TIFFSetErrorHandler(nullptr);
    TIFFSetWarningHandler(nullptr);
    return true;
  }();
  (void)silenced;
  TiffBytes source{bytes};
  const auto read = [](thandle_t h, tdata_t buffer, tmsize_t size) -> tmsize_t {
    auto& s = *static_cast<TiffBytes*>(h);
    const std::uint64_t left = s.position < s.bytes.size() ? s.bytes.size() - s.position : 0;
    const auto n = static_cast<std::uint64_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(std::max<tmsize_t>(size, 0)), left));
    std::memcpy(buffer, s.bytes.data() + s.position, n);
    s.position += n;
    return static_cast<tmsize_t>(n);
  };
  const auto write = [](thandle_t, tdata_t, tmsize_t) -> tmsize_t { return 0; };
  const auto seek = [](thandle_t h, toff_t offset, int whence) -> toff_t {
    auto& s = *static_cast<TiffBytes*>(h);
    const std::uint64_t base = whence == SEEK_CUR ? s.position : whence == SEEK_END ? s.bytes.size() : 0;
    s.position = base + offset;
    return s.position;
  };
  const auto close = [](thandle_t) { return 0; };
  const auto size = [](thandle_t h) -> toff_t { return static_cast<TiffBytes*>(h)->bytes.size(); };
  const auto map = [](thandle_t, tdata_t*, toff_t*) { return 0; };
  const auto unmap = [](thandle_t, tdata_t, toff_t) {};
  TIFF* tiff = TIFFClientOpen("image", "rm", &source, read, write, seek, close, size, map, unmap);
  if (tiff == nullptr) return std::nullopt;
  std::uint32_t width = 0, height = 0;
  const bool known = TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width) == 1 && TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &height) == 1;
  TIFFClose(tiff);
  if (!known) return std::nullopt;
  return Size{width, height};
}
#endif

// Netpbm (PBM/PGM/PPM, P1-P6) and PFM (Pf/PF): a magic, then width and height as decimal text,
// with # comments in the netpbm ones.
std::optional<Size> netpbm_size(const std::vector<std::uint8_t>& bytes) {
  std::size_t pos = 2;
  std::int64_t values[2] = {0, 0};
  for (std::int64_t& value : values) {
    while (pos < bytes.size() && (std::isspace(bytes[pos]) || bytes[pos] == '#')) {
      if (bytes[pos] == '#') while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
      else ++pos;
    }
    const std::size_t start = pos;
    while (pos < bytes.size() && std::isdigit(bytes[pos]) && pos - start < 10) value = value * 10 + (bytes[pos++] - '0');
    if (pos == start) return std::nullopt;
  }
  return Size{values[0], values[1]};
}

// The image size a format's header gives, before any pixel is decoded: PNG's IHDR, BMP's info
// header, TIFF's first directory (libtiff), WebP's canvas (libwebp), the netpbm and PFM text
// headers. JPEG's comes from libjpeg-turbo's header read. Nothing for a format whose size cannot
// be read this way: such a file is refused rather than decoded unchecked.
std::optional<Size> header_size(const std::vector<std::uint8_t>& bytes) {
  if (is_png(bytes)) return Size{read_u32(bytes.data() + 16, false), read_u32(bytes.data() + 20, false)};
  if (bytes.size() >= 26 && bytes[0] == 'B' && bytes[1] == 'M') {
    if (read_u32(bytes.data() + 14, true) == 12) {  // OS/2's BITMAPCOREHEADER: 16-bit sides
      return Size{read_u16(bytes.data() + 18, true), read_u16(bytes.data() + 20, true)};
    }
    const auto width = static_cast<std::int32_t>(read_u32(bytes.data() + 18, true));
    const auto height = static_cast<std::int32_t>(read_u32(bytes.data() + 22, true));  // negative: top-down rows
    return Size{std::abs(static_cast<std::int64_t>(width)), std::abs(static_cast<std::int64_t>(height))};
  }
  if (bytes.size() >= 3 && bytes[0] == 'P' && ((bytes[1] >= '1' && bytes[1] <= '6') || bytes[1] == 'f' || bytes[1] == 'F') &&
      std::isspace(bytes[2])) {
    return netpbm_size(bytes);
  }
#if LIBREYOLO_READS_ALL_FORMATS
  const bool tiff = bytes.size() >= 8 && ((bytes[0] == 'I' && bytes[1] == 'I') || (bytes[0] == 'M' && bytes[1] == 'M'));
  if (tiff) return tiff_size(bytes);
  if (bytes.size() >= 12 && std::equal(bytes.begin(), bytes.begin() + 4, "RIFF") && std::equal(bytes.begin() + 8, bytes.begin() + 12, "WEBP")) {
    int width = 0, height = 0;
    if (WebPGetInfo(bytes.data(), bytes.size(), &width, &height) == 0) return std::nullopt;
    return Size{width, height};
  }
#endif
  return std::nullopt;
}

#if LIBREYOLO_READS_ALL_FORMATS
// Holds the pixel limit for a format other than JPEG before it is decoded (see header_size).
void check_header_size(const std::vector<std::uint8_t>& bytes) {
  const auto size = header_size(bytes);
  if (!size) {
    throw CorruptImage("cannot identify image file: not JPEG, PNG, BMP, TIFF, WebP or PNM/PFM with a readable header (a "
                       "format whose size cannot be read before decoding is not decoded): convert it to JPEG or PNG");
  }
  if (size->first <= 0 || size->second <= 0) throw CorruptImage(fmt::format("the header gives a {}x{} image", size->first, size->second));
  check_pixel_limit(size->first, size->second);
}
#endif

}  // namespace

ImageInfo read_image_info(const fs::path& path) {
  const auto bytes = read_file_bytes(path);
  ImageInfo info;
  if (is_jpeg(bytes)) {
    int subsampling = 0, colorspace = 0;
    if (tjDecompressHeader3(thread_decompressor(), bytes.data(), static_cast<unsigned long>(bytes.size()), &info.width,
                            &info.height, &subsampling, &colorspace) != 0) {
      throw CorruptImage(fmt::format("unreadable JPEG header: {}", tjGetErrorStr2(thread_decompressor())));
    }
    if (info.width <= 0 || info.height <= 0) throw CorruptImage("JPEG header holds no image size");
    info.format = "jpeg";
    info.truncated = !has_jpeg_end_marker(bytes);
    info.orientation = jpeg_exif_orientation(bytes.data(), bytes.size());
  } else if (is_png(bytes)) {
    info.format = "png";
    info.width = static_cast<int>(read_u32(bytes.data() + 16, false));
    info.height = static_cast<int>(read_u32(bytes.data() + 20, false));
  } else {
    // the header's size holds the limit before anything is decoded; the decode then gives the
    // upright size (OpenCV applies the orientation a format carries)
    const cv::Mat image = decode_image_bytes(bytes);  // throws without imgcodecs, or over the pixel limit
    info.format = "other";
    info.width = image.cols;
    info.height = image.rows;
    return info;  // OpenCV already applied orientation
  }
  if (swaps_axes(info.orientation)) std::swap(info.width, info.height);
  return info;
}

// The long side at least `target` (no scaling unless the image is twice that or more).
std::function<cv::Size(cv::Size)> covering_long_side(int target) {
  if (target <= 0) return {};
  return [target](cv::Size full) {
    if (2 * target > std::max(full.width, full.height)) return full;
    return full.width >= full.height ? cv::Size(target, 0) : cv::Size(0, target);
  };
}

cv::Mat decode_image_bytes(const std::vector<std::uint8_t>& bytes, int target_long_side, bool upright) {
  if (bytes.empty()) throw CorruptImage("empty file");
  if (is_jpeg(bytes)) return decode_jpeg(bytes, covering_long_side(target_long_side), upright);
#if LIBREYOLO_READS_ALL_FORMATS
  check_header_size(bytes);
  cv::Mat image;
  try {
    image = cv::imdecode(bytes, upright ? cv::IMREAD_COLOR : cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& error) {
    throw CorruptImage(fmt::format("cannot decode image: {}", error.msg));
  }
  if (image.empty()) throw CorruptImage("cannot identify image file (not an image OpenCV can decode)");
  check_pixel_limit(image.cols, image.rows);
  return image;
#else
  if (const auto size = header_size(bytes)) check_pixel_limit(size->first, size->second);
  throw CorruptImage(fmt::format("not a JPEG, and this build reads JPEG only (built without OpenCV's imgcodecs); convert the {} "
                                 "to JPEG or use a build with libopencv-imgcodecs",
                                 is_png(bytes) ? "PNG" : "image"));
#endif
}

bool reads_all_formats() { return LIBREYOLO_READS_ALL_FORMATS != 0; }

std::vector<std::uint8_t> encode_image(const cv::Mat& image, const std::string& extension, int jpeg_quality) {
  std::string lower = extension;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == ".jpg" || lower == ".jpeg") return encode_jpeg(image, jpeg_quality);
#if LIBREYOLO_READS_ALL_FORMATS
  std::vector<std::uint8_t> bytes;
  try {
    if (!image.empty() && cv::imencode(lower, image, bytes)) return bytes;
  } catch (const cv::Exception&) {
  }
#endif
  return {};
}

cv::Mat decode_stored_covering(const std::vector<std::uint8_t>& bytes, const std::function<cv::Size(cv::Size)>& cover,
                               cv::Size& full) {
  if (bytes.empty()) throw CorruptImage("empty file");
  if (is_jpeg(bytes)) {
    cv::Mat image = decode_jpeg(bytes, [&](cv::Size size) {
      full = size;
      return cover(size);
    }, /*upright=*/false);
    return image;
  }
  cv::Mat image = decode_image_bytes(bytes, 0, /*upright=*/false);
  full = image.size();
  (void)cover(full);
  return image;
}

cv::Mat decode_image(const fs::path& path, int target_long_side, bool upright) {
  return decode_image_bytes(read_file_bytes(path), target_long_side, upright);
}

}  // namespace libreyolo::data
