#include "core/option_table.h"
#include "models/family.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include "catch.h"  // last: see catch.h

using namespace libreyolo::config;

namespace {

std::string read_man(const char* name) {
  const char* root = std::getenv("LIBREYOLO_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  const auto path = std::filesystem::path(root) / "man" / name;
  std::ifstream stream(path);
  REQUIRE(stream.good());
  std::stringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

// troff escapes '-' as '\-' and '\' as '\e'; undo that so keys and defaults compare plainly.
std::string unescape(std::string text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '-') continue;
    out += text[i];
  }
  return out;
}

}  // namespace

TEST_CASE("libreyolo-train.1 documents every key of the option table with its default", "[man]") {
  const std::string page = unescape(read_man("libreyolo-train.1"));
  for (const auto& spec : libreyolo::models::option_table()) {
    INFO("missing from man/libreyolo-train.1: " << spec.name << "=" << spec.default_value
                                                << " (regenerate with: libreyolo man-options)");
    CHECK(page.find(".B " + std::string(spec.name) + "=" + std::string(spec.default_value) + "\n") != std::string::npos);
  }
}

TEST_CASE("libreyolo-train.1 names every Ultralytics alias", "[man]") {
  const std::string page = unescape(read_man("libreyolo-train.1"));
  for (const auto& alias : aliases()) {
    INFO(alias.alias);
    CHECK(page.find(std::string(alias.alias)) != std::string::npos);
  }
}
