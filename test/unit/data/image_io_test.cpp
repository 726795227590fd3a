#include "data/image_io.h"
#include "build_config.h"
#include "test_images.h"

#if LIBREYOLO_HAVE_IMGCODECS && !defined(LIBREYOLO_JPEG_ONLY)
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif
#include <functional>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;

namespace {

std::uint32_t crc32(const std::uint8_t* data, std::size_t size, std::uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(value >> shift));
}

void put_chunk(std::vector<std::uint8_t>& out, const char* type, const std::vector<std::uint8_t>& body) {
  put_u32(out, static_cast<std::uint32_t>(body.size()));
  std::vector<std::uint8_t> typed(type, type + 4);
  typed.insert(typed.end(), body.begin(), body.end());
  out.insert(out.end(), typed.begin(), typed.end());
  put_u32(out, crc32(typed.data(), typed.size()));
}

// An 8-bit RGB PNG written by hand (zlib stream of stored deflate blocks), so that the test
// needs no encoder: a JPEG-only build (imgcodecs=disabled) runs it too.
std::vector<std::uint8_t> handmade_png(const cv::Mat& bgr) {
  std::vector<std::uint8_t> raw;  // filter byte 0, then RGB
  for (int y = 0; y < bgr.rows; ++y) {
    raw.push_back(0);
    for (int x = 0; x < bgr.cols; ++x) {
      const cv::Vec3b pixel = bgr.at<cv::Vec3b>(y, x);
      raw.insert(raw.end(), {pixel[2], pixel[1], pixel[0]});
    }
  }
  std::vector<std::uint8_t> zlib = {0x78, 0x01};
  for (std::size_t start = 0; start < raw.size(); start += 65535) {
    const std::size_t length = std::min<std::size_t>(65535, raw.size() - start);
    zlib.push_back(start + length == raw.size() ? 1 : 0);
    zlib.insert(zlib.end(), {static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
                             static_cast<std::uint8_t>(~length), static_cast<std::uint8_t>(~length >> 8)});
    zlib.insert(zlib.end(), raw.begin() + static_cast<std::ptrdiff_t>(start), raw.begin() + static_cast<std::ptrdiff_t>(start + length));
  }
  std::uint32_t a = 1, b = 0;  // Adler-32
  for (const std::uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  put_u32(zlib, b << 16 | a);
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<std::uint8_t> header;
  put_u32(header, static_cast<std::uint32_t>(bgr.cols));
  put_u32(header, static_cast<std::uint32_t>(bgr.rows));
  header.insert(header.end(), {8, 2, 0, 0, 0});  // 8-bit, RGB, deflate, adaptive filters, no interlace
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", zlib);
  put_chunk(png, "IEND", {});
  return png;
}

}  // namespace

TEST_CASE("JPEG and PNG headers give the size without decoding", "[image_io]") {
  const auto folder = fresh_folder("imageinfo");
  const cv::Mat image = gradient(64, 48);
  write_bytes(folder / "a.jpg", jpeg_bytes(image));
  write_bytes(folder / "b.png", handmade_png(image));
  const auto jpeg_info = read_image_info(folder / "a.jpg");
  CHECK(jpeg_info.format == "jpeg");
  CHECK(jpeg_info.width == 64);
  CHECK(jpeg_info.height == 48);
  CHECK_FALSE(jpeg_info.truncated);
  const auto png_info = read_image_info(folder / "b.png");
  CHECK(png_info.format == "png");
  CHECK(png_info.width == 64);
  CHECK(png_info.height == 48);
  std::filesystem::remove_all(folder);
}

TEST_CASE("a PNG decodes exactly where the build has imgcodecs, and says JPEG only where it has not", "[image_io]") {
  const cv::Mat image = gradient(70, 40);
  const std::vector<std::uint8_t> png = handmade_png(image);
  if (reads_all_formats()) {
    const cv::Mat decoded = decode_image_bytes(png);
    REQUIRE(decoded.size() == image.size());
    CHECK(cv::norm(decoded, image, cv::NORM_INF) == 0);
    const std::vector<std::uint8_t> written = encode_image(image, ".PNG");
    REQUIRE_FALSE(written.empty());
    CHECK(cv::norm(decode_image_bytes(written), image, cv::NORM_INF) == 0);
  } else {
    CHECK_THROWS_WITH(decode_image_bytes(png), Catch::Contains("this build reads JPEG only") && Catch::Contains("PNG"));
    CHECK(encode_image(image, ".png").empty());
  }
}

TEST_CASE("encode_image writes JPEG through libjpeg-turbo, colour and grey, and refuses unknown formats", "[image_io]") {
  const cv::Mat image = gradient(64, 48);
  const std::vector<std::uint8_t> jpeg = encode_image(image, ".jpeg", 95);
  REQUIRE(jpeg.size() > 3);
  CHECK(jpeg[0] == 0xFF);
  CHECK(jpeg[1] == 0xD8);
  const cv::Mat decoded = decode_image_bytes(jpeg);
  REQUIRE(decoded.size() == image.size());
  CHECK(cv::norm(decoded, image, cv::NORM_L1) / static_cast<double>(image.total() * 3) < 3.0);  // mean error of a q95 JPEG
  CHECK(encode_image(image, ".jpg", 20).size() < jpeg.size());  // the quality is honoured
  cv::Mat grey;
  cv::extractChannel(image, grey, 1);
  const cv::Mat grey_decoded = decode_image_bytes(encode_image(grey, ".jpg", 95));
  REQUIRE(grey_decoded.size() == grey.size());
  cv::Mat channel;
  cv::extractChannel(grey_decoded, channel, 1);
  CHECK(cv::norm(channel, grey, cv::NORM_INF) <= 8);
  const cv::Mat roi = image(cv::Rect(3, 5, 33, 20));  // not continuous
  CHECK(decode_image_bytes(encode_image(roi, ".jpg")).size() == roi.size());
  CHECK(encode_image(image, ".xyz").empty());
  CHECK(encode_image(cv::Mat(), ".jpg").empty());
}

#if LIBREYOLO_HAVE_IMGCODECS && !defined(LIBREYOLO_JPEG_ONLY)
TEST_CASE("encode_image writes the bytes OpenCV's imencode writes", "[image_io]") {
  // The synthetic datasets and plots were written by imencode: the same settings keep them byte-identical.
  cv::Mat image(61, 77, CV_8UC3);
  cv::randu(image, 0, 255);
  cv::circle(image, {30, 30}, 12, {10, 200, 30}, cv::FILLED);
  for (const int quality : {75, 90, 95}) {
    std::vector<std::uint8_t> reference;
    REQUIRE(cv::imencode(".jpg", image, reference, {cv::IMWRITE_JPEG_QUALITY, quality}));
    CHECK(encode_image(image, ".jpg", quality) == reference);
  }
}
#endif

TEST_CASE("EXIF orientation 6 swaps the size and rotates the pixels clockwise", "[image_io]") {
  const auto folder = fresh_folder("exif");
  const cv::Mat image = gradient(64, 32);  // wide; x gradient in channel 0
  write_bytes(folder / "rotated.jpg", with_exif_orientation(jpeg_bytes(image), 6));
  const auto info = read_image_info(folder / "rotated.jpg");
  CHECK(info.orientation == 6);
  CHECK(info.width == 32);
  CHECK(info.height == 64);
  const cv::Mat decoded = decode_image(folder / "rotated.jpg");
  REQUIRE(decoded.cols == 32);
  REQUIRE(decoded.rows == 64);
  // Rotated clockwise: the old left edge (x=0, dark channel 0) is now the top row.
  CHECK(decoded.at<cv::Vec3b>(1, 16)[0] < 40);
  CHECK(decoded.at<cv::Vec3b>(62, 16)[0] > 215);
  std::filesystem::remove_all(folder);
}

TEST_CASE("decode_stored_covering: the smallest DCT scale that covers the asked size, as stored", "[image_io]") {
  const auto bytes = with_exif_orientation(jpeg_bytes(gradient(640, 480)), 6);
  cv::Size full;
  const cv::Mat half = decode_stored_covering(bytes, [](cv::Size size) { return cv::Size(size.width / 2 - 10, size.height / 2 - 10); }, full);
  CHECK(full == cv::Size(640, 480));       // the stored size: orientation 6 not applied
  CHECK(half.size() == cv::Size(320, 240));  // 1/2 covers 310 x 230; 3/8 (240 x 180) does not
  const cv::Mat whole = decode_stored_covering(bytes, [](cv::Size size) { return cv::Size(size.width, 1); }, full);
  CHECK(whole.size() == cv::Size(640, 480));
  const cv::Mat eighth = decode_stored_covering(bytes, [](cv::Size) { return cv::Size(0, 0); }, full);
  CHECK(eighth.size() == cv::Size(80, 60));
  // at scale 1 the pixels are the full decode's, as stored
  CHECK(cv::norm(whole, decode_image_bytes(bytes, 0, /*upright=*/false), cv::NORM_INF) == 0);
}

TEST_CASE("every EXIF orientation is undone to the same upright image", "[image_io]") {
  const cv::Mat upright = gradient(40, 24);
  // For each orientation build the stored image that a camera would write, then undo it.
  for (int orientation = 1; orientation <= 8; ++orientation) {
    cv::Mat stored = upright.clone();
    // inverse transforms of apply_orientation
    switch (orientation) {
      case 2: cv::flip(upright, stored, 1); break;
      case 3: cv::rotate(upright, stored, cv::ROTATE_180); break;
      case 4: cv::flip(upright, stored, 0); break;
      case 5: cv::transpose(upright, stored); break;
      case 6: cv::rotate(upright, stored, cv::ROTATE_90_COUNTERCLOCKWISE); break;
      case 7: cv::rotate(upright, stored, cv::ROTATE_180); cv::transpose(stored, stored); break;
      case 8: cv::rotate(upright, stored, cv::ROTATE_90_CLOCKWISE); break;
      default: break;
    }
    INFO("orientation " << orientation);
    const cv::Mat restored = apply_orientation(stored, orientation);
    REQUIRE(restored.size() == upright.size());
    CHECK(cv::norm(restored, upright, cv::NORM_INF) == 0);
  }
}

TEST_CASE("DCT scaling decodes large JPEGs small, never below the target", "[image_io]") {
  const auto bytes = jpeg_bytes(gradient(1280, 960));
  CHECK(decode_image_bytes(bytes).cols == 1280);
  const cv::Mat half = decode_image_bytes(bytes, 640);
  CHECK(half.cols == 640);
  CHECK(half.rows == 480);
  const cv::Mat eighth = decode_image_bytes(bytes, 100);
  CHECK(eighth.cols >= 100);
  CHECK(eighth.cols == 160);
  // a target above half the source decodes at full size (the resize step does the rest)
  CHECK(decode_image_bytes(bytes, 700).cols == 1280);
}

TEST_CASE("a truncated JPEG decodes as far as it goes; garbage is corrupt", "[image_io]") {
  const auto folder = fresh_folder("truncated");
  auto bytes = jpeg_bytes(gradient(128, 128));
  bytes.resize(bytes.size() * 2 / 3);
  write_bytes(folder / "truncated.jpg", bytes);
  const auto info = read_image_info(folder / "truncated.jpg");
  CHECK(info.truncated);
  const cv::Mat decoded = decode_image(folder / "truncated.jpg");
  CHECK(decoded.cols == 128);
  // the top rows survived
  CHECK(decoded.at<cv::Vec3b>(0, 127)[0] > 200);

  write_text(folder / "text.jpg", "this is not an image\n");
  CHECK_THROWS_AS(read_image_info(folder / "text.jpg"), CorruptImage);
  CHECK_THROWS_AS(decode_image(folder / "text.jpg"), CorruptImage);
  write_bytes(folder / "header_only.jpg", std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 40));
  CHECK_THROWS_AS(read_image_info(folder / "header_only.jpg"), CorruptImage);
  std::filesystem::remove_all(folder);
}

TEST_CASE("an image over the pixel limit is refused from its header, before its pixels are decoded", "[image_io]") {
  const auto refused = [](const std::vector<std::uint8_t>& bytes) {
    try {
      decode_image_bytes(bytes);
    } catch (const CorruptImage& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  const std::string limit = "20000x20000 = 400000000 pixels, over the 89478485-pixel limit";
  // a PNG whose IHDR says 20000x20000 (and nothing after it: decoding would fail otherwise)
  std::vector<std::uint8_t> png{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  for (const std::uint32_t side : {20000u, 20000u}) {
    for (int shift = 24; shift >= 0; shift -= 8) png.push_back(static_cast<std::uint8_t>(side >> shift));
  }
  png.insert(png.end(), {8, 2, 0, 0, 0, 0, 0, 0, 0});
  CHECK_THAT(refused(png), Catch::Matchers::Contains(limit));
  // a JPEG whose frame header (SOF0) says 20000x20000: libjpeg-turbo's header read, then the limit
  std::vector<std::uint8_t> jpeg = encode_image(cv::Mat(16, 16, CV_8UC3, cv::Scalar(10, 200, 30)), ".jpg", 90);
  bool patched = false;
  for (std::size_t i = 2; i + 9 < jpeg.size() && !patched; ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == 0xC0) {
      jpeg[i + 5] = jpeg[i + 7] = 20000 >> 8;
      jpeg[i + 6] = jpeg[i + 8] = 20000 & 0xFF;
      patched = true;
    }
  }
  REQUIRE(patched);
  CHECK_THAT(refused(jpeg), Catch::Matchers::Contains(limit));
  // a BMP header (BITMAPINFOHEADER, top-down rows: a negative height)
  std::vector<std::uint8_t> bmp(54, 0);
  bmp[0] = 'B';
  bmp[1] = 'M';
  const auto put32 = [&](std::size_t at, std::int32_t v) {
    for (int k = 0; k < 4; ++k) bmp[at + k] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(v) >> (8 * k));
  };
  put32(14, 40);
  put32(18, 20000);
  put32(22, -20000);
  CHECK_THAT(refused(bmp), Catch::Matchers::Contains(limit));
  // under the limit, decoding goes on
  CHECK(decode_image_bytes(encode_image(cv::Mat(16, 16, CV_8UC3, cv::Scalar(1, 2, 3)), ".jpg")).cols == 16);
}

#if LIBREYOLO_HAVE_IMGCODECS && !defined(LIBREYOLO_JPEG_ONLY)
namespace {

// A little-endian TIFF of one 8-bit grey strip whose directory claims width x height: 110 bytes
// that a decoder would allocate width * height bytes for.
std::vector<std::uint8_t> tiff_claiming(std::uint32_t width, std::uint32_t height) {
  std::vector<std::uint8_t> out{'I', 'I', 42, 0, 8, 0, 0, 0};
  const auto put = [&](std::uint64_t value, int bytes) {
    for (int k = 0; k < bytes; ++k) out.push_back(static_cast<std::uint8_t>(value >> (8 * k)));
  };
  const std::uint32_t entries[][3] = {{256, 4, width}, {257, 4, height}, {258, 3, 8}, {259, 3, 1}, {262, 3, 1},
                                      {273, 4, 110}, {278, 4, height}, {279, 4, width * height}};
  put(8, 2);
  for (const auto& e : entries) {
    put(e[0], 2);
    put(e[1], 2);
    put(1, 4);
    put(e[2], 4);  // a SHORT sits in the low bytes of the value field
  }
  put(0, 4);
  return out;
}

// A WebP with only its extended header (VP8X): a canvas of width x height, 30 bytes.
std::vector<std::uint8_t> webp_claiming(std::uint32_t width, std::uint32_t height) {
  std::vector<std::uint8_t> out{'R', 'I', 'F', 'F', 22, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0, 0, 0, 0, 0};
  for (const std::uint32_t side : {width - 1, height - 1}) {
    for (int k = 0; k < 3; ++k) out.push_back(static_cast<std::uint8_t>(side >> (8 * k)));
  }
  return out;
}

std::string refusal(const std::function<void()>& read) {
  try {
    read();
  } catch (const CorruptImage& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("TIFF and WebP decompression bombs are refused from their headers, in the scan and the decode", "[image_io]") {
  const auto folder = fresh_folder("bombs");
  const std::vector<std::pair<std::string, std::vector<std::uint8_t>>> bombs{
      {"bomb.tif", tiff_claiming(30000, 30000)}, {"bomb.webp", webp_claiming(16383, 16383)}};
  const std::vector<std::string> limits{"30000x30000 = 900000000 pixels, over the 89478485-pixel limit",
                                        "16383x16383 = 268402689 pixels, over the 89478485-pixel limit"};
  for (std::size_t i = 0; i < bombs.size(); ++i) {
    const auto& [name, bytes] = bombs[i];
    INFO(name);
    write_bytes(folder / name, bytes);
    CHECK_THAT(refusal([&] { read_image_info(folder / name); }), Catch::Matchers::Contains(limits[i]));
    CHECK_THAT(refusal([&] { decode_image_bytes(bytes); }), Catch::Matchers::Contains(limits[i]));
  }
  // the same headers at a size under the limit go on to OpenCV (which finds no pixels in these)
  CHECK_THAT(refusal([&] { decode_image_bytes(tiff_claiming(64, 48)); }), !Catch::Matchers::Contains("pixel limit"));
  // real files of both formats still decode at their size
  for (const char* extension : {".tiff", ".webp"}) {
    INFO(extension);
    std::vector<std::uint8_t> encoded;
    REQUIRE(cv::imencode(extension, cv::Mat(24, 40, CV_8UC3, cv::Scalar(10, 20, 30)), encoded));
    write_bytes(folder / (std::string("real") + extension), encoded);
    const ImageInfo info = read_image_info(folder / (std::string("real") + extension));
    CHECK(info.width == 40);
    CHECK(info.height == 24);
    CHECK(decode_image_bytes(encoded).rows == 24);
  }
  // a format whose size no header reader gives (Sun raster here) is refused, not decoded unchecked
  std::vector<std::uint8_t> sun_raster;
  REQUIRE(cv::imencode(".ras", cv::Mat(8, 8, CV_8UC3, cv::Scalar(1, 2, 3)), sun_raster));
  CHECK_THAT(refusal([&] { decode_image_bytes(sun_raster); }), Catch::Matchers::Contains("convert it to JPEG or PNG"));
  std::filesystem::remove_all(folder);
}
#endif
