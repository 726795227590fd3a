// The DETR families' denoising queries from our own draws (test/parity/ checks the construction
// against libreyolo 1.6.0 with its draws): a seeded generator repeats itself, positives stay
// within half their box of the target and negatives beyond it, padded slots carry no class.
#include "models/box_ops.h"
#include "models/detr/denoising.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "catch.h"  // last: see catch.h

using namespace libreyolo::models::detr;

TEST_CASE("denoising: seeded draws repeat, positives stay near their targets, negatives farther", "[detr]") {
  const DetrTargets targets{at::tensor({3, 7, 1}, at::kLong),
                            at::tensor({0.5, 0.5, 0.2, 0.4, 0.3, 0.6, 0.1, 0.1, 0.7, 0.2, 0.3, 0.3}).to(at::kFloat).view({3, 4}),
                            {2, 0, 1}};
  DenoisingOptions options;
  options.classes = 10;
  options.queries = 5;
  options.denoising = 8;  // 8 / 2 targets at most: 4 groups of 2 positive + 2 negative slots
  const auto [count, groups] = denoising_shape(targets.counts, options);
  REQUIRE(count == 16);
  REQUIRE(groups == 4);
  const auto draw = [&](std::uint64_t seed) {
    return draw_denoising_noise(3, count, options.classes, at::make_generator<at::CPUGeneratorImpl>(seed));
  };
  const DenoisingNoise noise = draw(7), again = draw(7), other = draw(8);
  CHECK(at::equal(noise.box_uniform, again.box_uniform));
  CHECK(at::equal(noise.random_label, again.random_label));
  CHECK_FALSE(at::equal(noise.box_uniform, other.box_uniform));
  CHECK(noise.sign_bit.min().item<float>() >= 0);
  CHECK(noise.sign_bit.max().item<float>() <= 1);
  CHECK(noise.random_label.max().item<std::int64_t>() < options.classes);

  const DenoisingQueries queries = make_denoising_queries(targets, options, noise);
  REQUIRE(queries.count == 16);
  CHECK(queries.attn_mask.sizes() == at::IntArrayRef({21, 21}));
  // image 1 has no target: every slot padded, its class the "no class" index
  CHECK((queries.classes[1] == options.classes).all().item<bool>());
  REQUIRE(queries.match.positive_queries.size() == 3);
  CHECK(queries.match.positive_queries[0].equal(at::tensor({0, 1, 4, 5, 8, 9, 12, 13}, at::kLong)));
  CHECK(queries.match.positive_queries[1].numel() == 0);
  // positives: each corner within half the target's size of the target's; negatives: between half and one
  const at::Tensor boxes = libreyolo::models::centre_size_to_corners(queries.boxes_unact.sigmoid());
  const at::Tensor target = libreyolo::models::centre_size_to_corners(targets.boxes[0]);
  const at::Tensor half = targets.boxes[0].narrow(0, 2, 2).repeat({2}) * 0.5;
  for (std::int64_t slot = 0; slot < 16; slot += 4) {  // image 0's first target, in each group's positive and negative halves
    const at::Tensor positive = (boxes[0][slot] - target).abs(), negative = (boxes[0][slot + 2] - target).abs();
    CHECK((positive <= half + 1e-4).all().item<bool>());
    // a negative moves each corner by half to one size (less where clipped to the image or where the box flipped)
    CHECK((negative <= 2 * half + 1e-4).all().item<bool>());
    CHECK((negative > half).any().item<bool>());
  }
  // the matching queries see no denoising query; group 0 sees itself only
  CHECK(queries.attn_mask.narrow(0, 16, 5).narrow(1, 0, 16).all().item<bool>());
  CHECK_FALSE(queries.attn_mask.narrow(0, 0, 4).narrow(1, 0, 4).any().item<bool>());
  CHECK(queries.attn_mask.narrow(0, 0, 4).narrow(1, 4, 12).all().item<bool>());

  const DetrTargets none{at::empty({0}, at::kLong), at::empty({0, 4}), {0, 0}};
  CHECK(make_denoising_queries(none, options, {}).count == 0);
}
