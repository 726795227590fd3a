// D-FINE (n, s, m, l, x): its network, the FDR set loss and LibreYOLO's D-FINE recipe
// (detr_common/dfine_style_recipe.h), behind the Family interface.
#include "models/detr_common/dfine_style_family.h"
#include "models/detr_common/dfine_style_recipe.h"

namespace libreyolo::models::dfine {

const Family& family() {
  static const auto instance = detr::make_dfine_style_family({
      .name = "dfine",
      .display = "D-FINE",
      .weights_prefix = "LibreDFINE",
      .sizes = detr::dfine_sizes(),
      .network = detr::DfineVariant::dfine,
      .deim_trainer = false,
      // its decoder's localization-quality heads; DEIM's weights carry the same names, so a file that
      // does not say its family reads as D-FINE (RT-DETR's keys are in these files too: precedence 1)
      .recognises_key = [](std::string_view name) {
        return name.starts_with("decoder.lqe_layers") || name.starts_with("decoder.decoder.lqe_layers");
      },
      .key_precedence = 1,
      .option_defaults = detr::dfine_option_defaults,
  });
  return *instance;
}

}  // namespace libreyolo::models::dfine
