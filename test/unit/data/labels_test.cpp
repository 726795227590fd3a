#include "data/labels.h"

#include <string>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::data;

namespace {
std::string reason(const std::string& text, int nc = 80) {
  try {
    parse_label_text(text, nc);
  } catch (const CorruptLabel& error) {
    return error.what();
  }
  return "";
}
}  // namespace

TEST_CASE("images/ maps to labels/ and the extension to .txt", "[labels]") {
  CHECK(label_path_for("/d/coco/images/train2017/0001.jpg") == "/d/coco/labels/train2017/0001.txt");
  CHECK(label_path_for("/d/images/x/images/a.PNG") == "/d/images/x/labels/a.txt");
  CHECK(label_path_for("/d/flat/a.jpg") == "/d/flat/a.txt");
}

TEST_CASE("5-column rows become boxes; blank lines are ignored", "[labels]") {
  const auto parsed = parse_label_text("0 0.5 0.5 0.2 0.4\n\n3 0.1 0.2 0.1 0.1\r\n", 80);
  REQUIRE(parsed.boxes.size() == 2);
  CHECK(parsed.boxes[0] == Box{0, 0.5f, 0.5f, 0.2f, 0.4f});
  CHECK(parsed.boxes[1].cls == 3);
  CHECK(parse_label_text("", 80).boxes.empty());
}

TEST_CASE("polygon rows become their bounding box", "[labels]") {
  const auto parsed = parse_label_text("2 0.1 0.2 0.5 0.2 0.5 0.6 0.1 0.6\n", 80);
  REQUIRE(parsed.boxes.size() == 1);
  CHECK(parsed.boxes[0].cx == Approx(0.3));
  CHECK(parsed.boxes[0].cy == Approx(0.4));
  CHECK(parsed.boxes[0].w == Approx(0.4));
  CHECK(parsed.boxes[0].h == Approx(0.4));
}

TEST_CASE("duplicate rows are removed and counted", "[labels]") {
  const auto parsed = parse_label_text("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n", 80);
  CHECK(parsed.boxes.size() == 2);
  CHECK(parsed.duplicates_removed == 1);
}

TEST_CASE("a box of zero width or height is kept, as Ultralytics and LibreYOLO keep it", "[labels]") {
  const auto parsed = parse_label_text("0 0.5 0.5 0.0 0.2\n1 0.5 0.5 0.3 0\n", 80);
  REQUIRE(parsed.boxes.size() == 2);
  CHECK(parsed.boxes[0].w == 0.0f);
  CHECK(parsed.boxes[1].h == 0.0f);
}

TEST_CASE("coordinates just outside [0,1] are clipped, further out is corrupt", "[labels]") {
  const auto parsed = parse_label_text("0 1.0005 0.5 0.2 0.2\n", 80);
  CHECK(parsed.boxes[0].cx == Approx(1.0));
  CHECK(reason("0 1.2 0.5 0.2 0.2").find("out of bounds") != std::string::npos);
  CHECK(reason("0 -0.3 0.5 0.2 0.2").find("negative label values") != std::string::npos);
}

TEST_CASE("corrupt rows say why", "[labels]") {
  CHECK(reason("0 0.5 0.5 0.2").find("5 columns") != std::string::npos);
  CHECK(reason("0 0.5 0.5 0.2 0.2 0.1").find("6 columns") != std::string::npos);
  CHECK(reason("80 0.5 0.5 0.2 0.2").find("exceeds dataset class count 80") != std::string::npos);
  // a 20-digit class is named as written, not as an overflowed integer
  CHECK(reason("12345678901234567890 0.5 0.5 0.2 0.2").find("label class 12345678901234567168 exceeds") != std::string::npos);
  CHECK(reason("3 0.5 0.5 0.2 0.2", 3).find("possible class labels are 0-2") != std::string::npos);
  CHECK(reason("-1 0.5 0.5 0.2 0.2").find("negative class") != std::string::npos);
  CHECK(reason("1.5 0.5 0.5 0.2 0.2").find("not an integer") != std::string::npos);
  CHECK(reason("0 nan 0.5 0.2 0.2").find("non-finite") != std::string::npos);
  CHECK(reason("0 0.5 0.5 abc 0.2").find("not a number") != std::string::npos);
}

TEST_CASE("valid UTF-8 a terminal obeys unseen (C1 controls, bidi overrides) is named escaped; other letters stay",
          "[labels]") {
  // U+202E (right-to-left override), U+009B (the one-byte CSI), U+2066 (an isolate), then e-acute and a CJK letter
  const std::string why = reason("ab\xe2\x80\xae" "cd\xc2\x9b" "31m\xe2\x81\xa6" "x\xc3\xa9\xe4\xb8\xad 0 .5 .5 .1 .1\n");
  INFO(why);
  CHECK(why.find("'ab\\u{202e}cd\\u{009b}31m\\u{2066}x\xc3\xa9\xe4\xb8\xad' is not a number") != std::string::npos);
  for (const std::string raw : {"\xe2\x80\xae", "\xc2\x9b", "\xe2\x81\xa6"}) CHECK(why.find(raw) == std::string::npos);
}

TEST_CASE("binary junk in a label is named escaped: no raw control or invalid UTF-8 bytes", "[labels]") {
  const std::string why = reason(std::string("\x01\xff\x1b[31mjunk\xc3\xa9 0 .5 .5 .1 .1\n", 24));
  INFO(why);
  CHECK(why.find("line 1: '\\x01\\xff\\x1b[31mjunk\xc3\xa9' is not a number") != std::string::npos);
  for (const char c : why) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7f));
  const std::string long_junk(100000, '\x02');
  const std::string cut = reason(long_junk + "\n");
  CHECK(cut.size() < 200);
  CHECK(cut.find("...") != std::string::npos);
}
