// average_best's pool: the N best snapshots by metric, floating tensors averaged, integer ones
// from the best, and a save/load round trip.
#include "train/weight_average.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <unistd.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo;

namespace {
models::NamedTensors snapshot(float value, std::int64_t counter) {
  return {{"w", at::full({2, 2}, value)}, {"bn.num_batches_tracked", at::full({}, counter, at::kLong)}};
}
}  // namespace

TEST_CASE("BestAverage keeps the N best and averages them", "[average]") {
  train::BestAverage pool(2);
  CHECK(pool.consider(snapshot(1, 10), 0.1));
  CHECK(pool.consider(snapshot(3, 30), 0.3));
  CHECK_FALSE(pool.consider(snapshot(9, 90), 0.05));  // worse than both
  CHECK_FALSE(pool.consider(snapshot(9, 90), std::nan("")));
  CHECK(pool.consider(snapshot(5, 50), 0.5));  // replaces 0.1
  auto average = pool.average();
  REQUIRE(average);
  CHECK(at::allclose((*average)[0].second, at::full({2, 2}, 4.0f)));   // (3 + 5) / 2
  CHECK((*average)[1].second.item<std::int64_t>() == 50);             // the best snapshot's counter
  const auto path = std::filesystem::temp_directory_path() / ("libreyolo_pool_" + std::to_string(::getpid()) + ".pt");
  pool.save(path);
  train::BestAverage back(1);  // a smaller pool keeps the best
  CHECK(back.load(path) == 1);
  CHECK(back.metrics() == std::vector<double>{0.5});
  std::filesystem::remove(path);
}
