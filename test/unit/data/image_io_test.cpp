#include "data/image_io.h"
#include "test_images.h"
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;
using namespace test_images;

TEST_CASE("JPEG and PNG headers give the size without decoding", "[image_io]") {
  const auto folder = fresh_folder("imageinfo");
  const cv::Mat image = gradient(64, 48);
  write_bytes(folder / "a.jpg", jpeg_bytes(image));
  std::vector<std::uint8_t> png;
  cv::imencode(".png", image, png);
  write_bytes(folder / "b.png", png);
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
