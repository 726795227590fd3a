#include "core/error.h"
#include "core/option_table.h"
#include "core/option_value.h"
#include "models/family.h"

#include <string>
#include "catch.h"  // last: see catch.h

using namespace libreyolo;
using namespace libreyolo::config;

namespace {

Value parse(std::string_view key, std::string_view text) { return parse_value(*find_option(libreyolo::models::option_table(), key), text); }

std::string error_of(std::string_view key, std::string_view text) {
  try {
    parse(key, text);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("bool values accept true/false, 1/0 and yes/no in any case", "[value]") {
  for (const char* text : {"true", "True", "1", "yes", "ON"}) CHECK(std::get<bool>(parse("amp", text)) == true);
  for (const char* text : {"false", "FALSE", "0", "no", "off"}) CHECK(std::get<bool>(parse("amp", text)) == false);
  const auto message = error_of("amp", "maybe");
  CHECK(message.find("amp=maybe") != std::string::npos);
  CHECK(message.find("true or false") != std::string::npos);
}

TEST_CASE("int values are whole numbers inside the key's range", "[value]") {
  CHECK(std::get<std::int64_t>(parse("epochs", "50")) == 50);
  CHECK(std::get<std::int64_t>(parse("batch", "-1")) == -1);
  CHECK(error_of("epochs", "1.5").find("'epochs' takes an integer") != std::string::npos);
  CHECK(error_of("epochs", "ten").find("epochs=ten") != std::string::npos);
  CHECK(error_of("epochs", "0").find("out of range") != std::string::npos);
  CHECK(error_of("workers", "-3").find("[0, 1024]") != std::string::npos);
}

TEST_CASE("float values accept ints, decimals and exponents, reject NaN and out of range", "[value]") {
  CHECK(std::get<double>(parse("lr0", "0.02")) == Approx(0.02));
  CHECK(std::get<double>(parse("lr0", "1e-3")) == Approx(0.001));
  CHECK(std::get<double>(parse("warmup_epochs", "3")) == Approx(3.0));
  CHECK(error_of("lr0", "2").find("'lr0=2' is out of range") != std::string::npos);
  CHECK(error_of("lr0", "nan").find("takes a number") != std::string::npos);
  CHECK(error_of("lr0", "0.1x").find("takes a number") != std::string::npos);
}

TEST_CASE("nullable keys accept none", "[value]") {
  CHECK(std::holds_alternative<std::monostate>(parse("nbs", "none")));
  CHECK(std::holds_alternative<std::monostate>(parse("nbs", "None")));
  CHECK(std::get<std::int64_t>(parse("nbs", "64")) == 64);
  CHECK_FALSE(error_of("epochs", "none").empty());
}

TEST_CASE("choice values are lower-cased and synonyms map to the canonical name", "[value]") {
  CHECK(std::get<std::string>(parse("amp_dtype", "bf16")) == "bfloat16");
  CHECK(std::get<std::string>(parse("amp_dtype", "FP16")) == "float16");
  CHECK(std::get<std::string>(parse("cache", "true")) == "ram");
  CHECK(std::get<std::string>(parse("cache", "disk")) == "disk");
  CHECK(std::get<std::string>(parse("cache", "")) == "false");
  CHECK(std::get<std::string>(parse("optimizer", "AdamW")) == "adamw");
  const auto message = error_of("optimizer", "lion");
  CHECK(message.find("sgd, adam, adamw") != std::string::npos);
}

TEST_CASE("tuple values accept (a,b), [a, b] and a,b", "[value]") {
  for (const char* text : {"(0.1,2.0)", "[0.1, 2.0]", "0.1,2", " ( 0.1 , 2.0 ) "}) {
    const auto pair = std::get<RealPair>(parse("mosaic_scale", text));
    CHECK(pair.first == Approx(0.1));
    CHECK(pair.second == Approx(2.0));
  }
  CHECK(error_of("mosaic_scale", "(0.5)").find("pair of numbers") != std::string::npos);
  CHECK(error_of("mosaic_scale", "(2.0,0.5)").find("must not exceed") != std::string::npos);
  CHECK(error_of("mosaic_scale", "(0.5,50)").find("out of range") != std::string::npos);
}

TEST_CASE("image sizes accept 640, 480x640 and [480,640]", "[value]") {
  CHECK(std::get<ImageSize>(parse("imgsz", "640")) == ImageSize{640, 640});
  CHECK(std::get<ImageSize>(parse("imgsz", "480x640")) == ImageSize{480, 640});
  CHECK(std::get<ImageSize>(parse("imgsz", "[480,640]")) == ImageSize{480, 640});
  CHECK(error_of("imgsz", "big").find("480x640") != std::string::npos);
  CHECK(error_of("imgsz", "16").find("out of range") != std::string::npos);
}

TEST_CASE("strings keep their text, without surrounding quotes", "[value]") {
  CHECK(std::get<std::string>(parse("name", "my_run")) == "my_run");
  CHECK(std::get<std::string>(parse("name", "'quoted run'")) == "quoted run");
  CHECK(std::get<std::string>(parse("device", "0,1")) == "0,1");
}

TEST_CASE("resume takes a bool or a path", "[value]") {
  CHECK(std::get<std::string>(parse("resume", "true")) == "true");
  CHECK(std::get<std::string>(parse("resume", "0")) == "false");
  CHECK(std::get<std::string>(parse("resume", "runs/train/exp/weights/last.pt")) == "runs/train/exp/weights/last.pt");
}

TEST_CASE("values print back in the syntax users type", "[value]") {
  CHECK(format_value(Value{std::monostate{}}) == "none");
  CHECK(format_value(Value{true}) == "true");
  CHECK(format_value(Value{std::int64_t{300}}) == "300");
  CHECK(format_value(Value{2.0}) == "2.0");
  CHECK(format_value(Value{0.0005}) == "0.0005");
  CHECK(format_value(Value{RealPair{0.1, 2.0}}) == "(0.1,2.0)");
  CHECK(format_value(Value{ImageSize{480, 640}}) == "480x640");
  CHECK(format_value(Value{ImageSize{640, 640}}) == "640");
}

TEST_CASE("every table default parses as its own type", "[value]") {
  for (const auto& spec : libreyolo::models::option_table()) {
    INFO(spec.name);
    CHECK_NOTHROW(parse_value(spec, spec.default_value));
    // printing and re-parsing a default gives the same value
    const Value value = parse_value(spec, spec.default_value);
    CHECK(parse_value(spec, format_value(value)) == value);
  }
}
