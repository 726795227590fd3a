// DEIM (n, s, m, l, x): D-FINE's network with SiLU heads, MAL in place of VFL, and LibreYOLO's DEIM
// recipe (detr_common/dfine_style_recipe.h), behind the Family interface.
#include "models/detr_common/dfine_style_family.h"
#include "models/detr_common/dfine_style_recipe.h"

namespace libreyolo::models::deim {

const Family& family() {
  static const auto instance = detr::make_dfine_style_family({
      .name = "deim",
      .display = "DEIM",
      .weights_prefix = "LibreDEIM",
      .sizes = detr::dfine_sizes(),
      .network = detr::DfineVariant::deim,
      .deim_trainer = true,
      .recognises_key = {},  // its weights carry D-FINE's names: a file that does not say reads as D-FINE
      .option_defaults = detr::deim_option_defaults,
  });
  return *instance;
}

}  // namespace libreyolo::models::deim
