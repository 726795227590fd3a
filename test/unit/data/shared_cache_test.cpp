// cache=ram's shared-memory copy: made by one process, joined by the others, filled by whoever
// needs an image first, gone from /dev/shm once everyone has joined; and each way it can fail
// is a reason, never a hang.
#include "data/shared_cache.h"

#include <fmt/format.h>
#include <opencv2/core.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "catch.h"  // last: see catch.h

using libreyolo::data::SharedCacheOptions;
using libreyolo::data::SharedImageCache;

namespace {

// Not "libreyolo-...": cli_dist_train checks that no such name is left behind.
std::string unique_name(const char* what) { return fmt::format("/libreyolo_unit-{}-{}", what, ::getpid()); }

bool name_exists(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

cv::Mat pattern(int rows, int cols, int seed) {
  cv::Mat image(rows, cols, CV_8UC3);
  cv::randu(image, cv::Scalar::all(seed), cv::Scalar::all(seed + 100));
  return image;
}

const std::vector<std::pair<int, int>> kCapacity{{10, 12}, {6, 6}, {12, 10}};

}  // namespace

TEST_CASE("shared cache: one process fills, another reads the same pixels; the name goes when all joined", "[data][dist]") {
  const std::string name = unique_name("two");
  std::string why;
  auto made = SharedImageCache::open({.name = name, .create = true, .processes = 2}, kCapacity, why);
  REQUIRE(made);
  CHECK(name_exists(name));  // the second process has not joined yet
  auto joined = SharedImageCache::open({.name = name, .create = false, .processes = 2}, kCapacity, why);
  REQUIRE(joined);
  CHECK_FALSE(name_exists(name));
  CHECK(joined->get(0).empty());
  const cv::Mat image = pattern(10, 11, 3);  // a column short of the slot's room
  made->put(0, image);
  const cv::Mat seen = joined->get(0);
  REQUIRE(seen.size() == image.size());
  CHECK(cv::norm(seen, image, cv::NORM_INF) == 0);
  // the first writer keeps the slot
  joined->put(0, pattern(10, 11, 50));
  CHECK(cv::norm(made->get(0), image, cv::NORM_INF) == 0);
  // an image larger than its slot is not cached, and the slot stays out of use
  made->put(1, pattern(7, 6, 1));
  CHECK(joined->get(1).empty());
  made->put(1, pattern(6, 6, 1));
  CHECK(joined->get(1).empty());
  CHECK(made->get(7).empty());  // out of range: nothing, not a crash
}

TEST_CASE("shared cache: across a fork, the child's image reaches the parent", "[data][dist]") {
  const std::string name = unique_name("fork");
  std::string why;
  auto made = SharedImageCache::open({.name = name, .create = true, .processes = 2}, kCapacity, why);
  REQUIRE(made);
  const pid_t child = ::fork();
  if (child == 0) {
    std::string reason;
    auto mine = SharedImageCache::open({.name = name, .create = false, .processes = 2}, kCapacity, reason);
    if (!mine) ::_exit(2);
    mine->put(2, pattern(12, 10, 9));
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(cv::norm(made->get(2), pattern(12, 10, 9), cv::NORM_INF) == 0);
  CHECK_FALSE(name_exists(name));
}

TEST_CASE("shared cache: declined, a different dataset, or no creator: a reason, never a hang", "[data][dist]") {
  std::string why;
  SECTION("the creator declines (no room): the others learn it at once") {
    const std::string name = unique_name("declined");
    SharedImageCache::decline({.name = name, .create = true, .processes = 2});
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(SharedImageCache::open({.name = name, .create = false, .processes = 2}, kCapacity, why));
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
    CHECK(why.find("could not reserve") != std::string::npos);
    CHECK_FALSE(name_exists(name));
  }
  SECTION("another layout") {
    const std::string name = unique_name("layout");
    auto made = SharedImageCache::open({.name = name, .create = true, .processes = 2}, kCapacity, why);
    REQUIRE(made);
    CHECK_FALSE(SharedImageCache::open({.name = name, .create = false, .processes = 2}, {{10, 12}}, why));
    CHECK(why.find("layout differs") != std::string::npos);
  }
  SECTION("no creator within the timeout") {
    const std::string name = unique_name("absent");
    CHECK_FALSE(SharedImageCache::open({.name = name, .create = false, .processes = 2, .attach_timeout = std::chrono::milliseconds(100)},
                                       kCapacity, why));
    CHECK(why.find("did not create it within") != std::string::npos);
  }
  SECTION("no room in /dev/shm: the creator's reservation fails cleanly") {
    // More than the whole of /dev/shm: tmpfs refuses that before it allocates a page (a request
    // under its size but over its free space would fill memory first).
    struct statvfs info {};
    REQUIRE(::statvfs("/dev/shm", &info) == 0);
    const std::uint64_t size = static_cast<std::uint64_t>(info.f_blocks) * info.f_frsize;
    if (size == 0) return;  // an unlimited /dev/shm: nothing to exceed without using the memory
    const int side = 1 << 15;  // slots of 3 GB each
    std::vector<std::pair<int, int>> huge(static_cast<std::size_t>(size / (3ull * side * side)) + 2, {side, side});
    const std::string name = unique_name("full");
    CHECK_FALSE(SharedImageCache::open({.name = name, .create = true, .processes = 1}, huge, why));
    CHECK(why.find("could not be reserved in /dev/shm") != std::string::npos);
    CHECK_FALSE(name_exists(name));
  }
}
