// The steps' logged values kept on the device until read: sums per term, the step count, the
// gradient flag ANDed, one read that starts again; read every step on the CPU (interval 1).
#include "train/step_losses.h"
#include "train/progress.h"

#include <ATen/ATen.h>

#include <cmath>

#include "catch.h"  // last: see catch.h

using libreyolo::train::StepLosses;

namespace {

libreyolo::models::LossTerms terms(double box, double cls) {
  libreyolo::models::LossTerms t;
  t.parts = {{"box_loss", at::scalar_tensor(box, at::kFloat)}, {"cls_loss", at::scalar_tensor(cls, at::kFloat)}};
  t.total = t.parts[0].second + t.parts[1].second;
  return t;
}

}  // namespace

TEST_CASE("step losses: summed until read, due every N steps, gradient flags ANDed", "[trainer]") {
  const std::vector<std::string> names{"box_loss", "cls_loss"};
  StepLosses losses(3);
  CHECK(losses.empty());
  losses.add(terms(1.0, 0.5), names, at::Tensor());
  losses.add(terms(2.0, 0.25), names, at::scalar_tensor(true, at::kBool));
  CHECK_FALSE(losses.due());
  losses.add(terms(3.0, 0.25), names, at::scalar_tensor(false, at::kBool));
  CHECK(losses.due());
  CHECK(losses.pending() == 3);
  const auto read = losses.read();
  CHECK(read.steps == 3);
  REQUIRE(read.sums.size() == 3);
  CHECK(read.sums[0] == Approx(7.0));
  CHECK(read.sums[1] == Approx(6.0));
  CHECK(read.sums[2] == Approx(1.0));
  CHECK_FALSE(read.gradients_finite);
  CHECK(losses.empty());
  // after a read: a fresh start, and no flag checked means finite
  losses.add(terms(0.5, 0.5), names, at::Tensor());
  const auto next = losses.read();
  CHECK(next.steps == 1);
  CHECK(next.sums[0] == Approx(1.0));
  CHECK(next.gradients_finite);
  // a NaN anywhere makes the sum NaN: the divergence check sees it at the read
  StepLosses every(1);
  every.add(terms(std::nan(""), 0.1), names, at::Tensor());
  CHECK(every.due());
  CHECK(std::isnan(every.read().sums[0]));
}

TEST_CASE("progress line: every loss keeps its 11-character column, however large", "[trainer]") {
  libreyolo::train::ProgressValues v{.epoch = 1, .epochs = 3, .losses = {5.3e13, 1.23456, 123456.0, -7.5e-5},
                                     .instances = 4, .size = 64, .done = 1, .total = 2};
  const std::string line = libreyolo::train::Progress::line(v);
  INFO(line);
  // after the epoch and memory columns, the four losses: 11 characters each, right-aligned, apart
  const std::string losses = line.substr(22, 44);
  CHECK(losses == "    5.3e+13      1.235  1.235e+05   -7.5e-05");
}
