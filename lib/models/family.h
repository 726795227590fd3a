// What differs between model families, behind one interface: building the network, the input it
// takes, decoding its maps, its training loss and the per-epoch switches, and how its checkpoints
// are recognised. The trainer, validator, predictor and checkpoint code ask a Family instead of
// comparing family names.
#pragma once

#include "core/config.h"
#include "core/option_help.h"
#include "core/option_table.h"
#include "data/input_fit.h"
#include "data/sample_pipeline.h"
#include "models/decode.h"
#include "models/loss_terms.h"
#include "models/model.h"
#include "models/targets.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace libreyolo::data {
class DetectionDataset;
}

namespace libreyolo::models {

// What a family's loss needs of the run besides its own gains, which it reads from the resolved
// options (make_loss).
struct LossContext {
  int image_size = 640;                  // imgsz (YOLOv5 scales its objectness gain by it)
  int world_size = 1;                    // data-parallel processes (YOLOv5 multiplies its loss by them)
  std::int64_t classes = 80;             // the dataset's (a set loss scores every class)
  GlobalNormaliser global_normaliser{};  // data-parallel training: the global batch's normaliser
  GlobalShare global_share{};            // data-parallel training: a count's global sum / world size
  // The model's training-only branch is attached (Model::enable_branch): the loss takes
  // the main head's maps and the branch's after them.
  bool training_branch = false;
};

// A family's training loss with its state (YOLOX turns its L1 term on for the last epochs).
class TrainingLoss {
 public:
  virtual ~TrainingLoss() = default;
  virtual LossTerms operator()(const std::vector<at::Tensor>& maps, const TargetBatch& targets) const = 0;
  // The no-augmentation epochs begin; returns what changed in the loss ("" for nothing), for the log.
  virtual std::string close_augmentation() { return {}; }
  // Why this loss cannot be captured in a CUDA graph (shapes that depend on the data), or "" when
  // it can: then its shapes depend only on the maps' and the targets' (and empty slots change nothing).
  virtual std::string capture_obstacle() const { return "its assignment has data-dependent shapes"; }
  // From now on the form a GPU runs, on any device: shapes that depend only on the inputs', no
  // host reads (on the CPU the default takes data-dependent shortcuts). For a captured loss: on a
  // GPU it changes nothing, on the CPU (the tests' capture backend) it runs what a GPU captures.
  virtual void use_static_shapes() {}
};

// What a CUDA graph may hold of the training step: the whole network, or only the backbone and
// encoder (a decoder whose denoising queries follow each batch's targets stays eager).
enum class GraphRegion { network, backbone_encoder };

// A parameter's optimizer treatment: weight decay or none, and its learning rate as a multiple of
// the schedule's (a DETR's backbone trains at a fraction). `group` orders the optimizer's groups;
// parameters with the same group share its rule.
struct ParameterRule {
  int group = 0;
  bool decay = true;
  double lr_multiplier = 1.0;
};
using ParameterRules = std::function<ParameterRule(std::string_view name)>;

class Family {
 public:
  virtual ~Family() = default;
  // Registration: the name users type before the size ("yolo9" of yolo9-t), LibreYOLO's weight-file
  // prefix (<prefix><size>.pt: "LibreYOLO9"), and the sizes. lib/models/meson.build lists the
  // family folders; each folder's family() returns its Family.
  virtual std::string_view name() const = 0;
  virtual std::string_view weights_prefix() const = 0;
  virtual std::vector<std::string> sizes() const = 0;
  // What follows the size in LibreYOLO's weight-file name: "-cls" for its classifiers
  // (LibreResNet18-cls.pt), none for the detectors.
  virtual std::string_view weights_suffix() const { return {}; }
  // The task its models do (eval::Task's name): what `task=` defaults to for them.
  virtual std::string_view task() const { return "detect"; }

  // `class_hidden`: YOLOv9's class-tower width (0 = the head formula's); others ignore it.
  // `fine_tune`: the form the family trains from weights in (fine_tune_form), else from scratch.
  virtual Model build(const std::string& size, int class_count, int class_hidden, bool fine_tune) const = 0;
  // What building with fine_tune changes, for the log ("the backbone's stem frozen"); empty where
  // a family trains weights and scratch alike (the YOLO heads).
  virtual std::string fine_tune_form(const std::string& size) const { (void)size; return {}; }
  // Whether a checkpoint's tensors were written by a model in that form where its names or buffers
  // say so (LibreYOLO's frozen norms have no num_batches_tracked); our checkpoints also mark it.
  virtual bool written_in_fine_tune_form(const std::string& size, const std::map<std::string, at::Tensor>& tensors) const {
    (void)size;
    (void)tensors;
    return false;
  }
  // The class-tower width a named model trains at (LibreYOLO builds it at COCO geometry), and the
  // width a state dict holds; 0 where the family has no such choice.
  virtual int named_class_hidden(const std::string& size) const { (void)size; return 0; }
  virtual int class_hidden_of(const std::map<std::string, at::Tensor>& tensors) const { (void)tensors; return 0; }
  // A tensor of a training-only branch (YOLOv9's PGI, RT-DETRv4's distillation projector), dropped
  // for inference; and that branch, named for the log.
  virtual bool is_training_only_tensor(std::string_view name) const { (void)name; return false; }
  virtual std::string_view training_only_branch() const { return {}; }
  // Whether the model's training-only branch (Model::enable_branch) trains with these
  // options (YOLOv9's PGI: aux_weight > 0); false where the family has none.
  virtual bool trains_branch(const config::Config& config) const { (void)config; return false; }
  // A state dict as another implementation writes it, in the form ours loads (RTMDet: the copies
  // of the head's shared convolutions that LibreYOLO repeats under levels 1 and 2 dropped, once
  // checked equal to level 0's). Throws ModelError where the file cannot be this family's.
  virtual void normalise_tensors(std::map<std::string, at::Tensor>& tensors) const { (void)tensors; }
  // The layer groups freeze=N counts, in order, as state-dict prefixes ("backbone.conv0.").
  virtual std::vector<std::string> freeze_groups(bool with_branch) const = 0;  // with_branch: the training-only branch attached
  // True when a state-dict key is this family's own (to identify a file that does not say).
  virtual bool recognises_key(std::string_view name) const = 0;
  // Where several families recognise a file's keys, the highest precedence names it (RT-DETRv4's
  // files hold D-FINE's keys, and D-FINE's RT-DETR's); two at the same precedence: the file is not identified.
  virtual int key_precedence() const { return 0; }

  // The network input from the loader's uint8 RGB [B, 3, H, W], float32 on `device`.
  virtual at::Tensor network_input(const at::Tensor& images, const c10::Device& device) const = 0;
  // A detector's maps as boxes and class scores (decode + NMS); a family without boxes (a
  // classifier) has none, and the default says so.
  virtual Decoded decode(const std::vector<at::Tensor>& maps) const;
  // The eval-mode maps from the training-shaped ones (YOLOX: objectness and classes sigmoided).
  virtual std::vector<at::Tensor> eval_maps(std::vector<at::Tensor> raw) const { return raw; }

  // The detections of eval maps when the family's postprocess is not decode + NMS (a DETR's top-k
  // queries): per image [K, 6] (x1, y1, x2, y2 in input pixels, score, class). nullopt: decode + NMS.
  virtual std::optional<std::vector<at::Tensor>> detections(const std::vector<at::Tensor>& maps, std::int64_t width,
                                                            std::int64_t height, double confidence, int max_detections) const {
    (void)maps, (void)width, (void)height, (void)confidence, (void)max_detections;
    return std::nullopt;
  }
  // How an image becomes the network input: letterboxed (centred or top-left), or stretched to the
  // square (the DETRs').
  virtual data::InputFit input_fit() const { return data::InputFit::letterbox; }
  // Whether validation's NMS takes each box's best class only (LibreYOLO's YOLOX and YOLOv7
  // postprocess) rather than every class above conf (Ultralytics', RTMDet's).
  virtual bool single_label_validation() const { return false; }
  // The confidence validation keeps detections above, where conf= is not given: 0.001 for the
  // YOLO heads; 0 for a DETR, whose top-k detections COCO ranks as they are (LibreYOLO's COCO_TOPK).
  virtual double validation_confidence() const { return 0.001; }
  virtual GraphRegion graph_region() const { return GraphRegion::network; }
  // Whether a training step may leave some parameters without a gradient (RT-DETR's denoising
  // embedding on a batch without targets), which a data-parallel reducer must then look for.
  virtual bool may_leave_parameters_unused() const { return false; }
  // The family's own optimizer groups, from the resolved options; empty: the YOLO recipes' (BatchNorm
  // weights, decayed weights, biases: train::parameter_groups).
  virtual ParameterRules parameter_rules(const config::Config& config) const { (void)config; return {}; }

  virtual std::vector<std::string> loss_names() const = 0;
  // The loss, its gains read from `config` (YOLOv9's box, cls and dfl; YOLOv5's box, obj, cls and anchor_t).
  virtual std::unique_ptr<TrainingLoss> make_loss(const LossContext& context, const config::Config& config) const = 0;
  // Measured on the CPU: oneDNN's channels-last convolutions help YOLOv9 and slow YOLOX.
  virtual bool channels_last_on_cpu() const = 0;
  // YOLOv9's recipe warms momentum up with the learning rate; YOLOX's does not.
  virtual bool warms_up_momentum() const = 0;
  // nbs as YOLOv5's train.py takes it (train::TrainState::ramp): the accumulation window grows over
  // the warm-up, the losses of a window add up and weight_decay scales by batch x accumulate / nbs.
  // false: LibreYOLO's fixed windows of round(nbs / batch), each loss divided by the window.
  virtual bool ramps_nominal_batch() const { return false; }
  // The training sample pipeline the family composes (data/sample_pipeline.h): its detection
  // augmentations. nullptr: the family's task augments its samples itself (classification).
  virtual std::shared_ptr<const data::SamplePipeline> sample_pipeline() const = 0;
  // multi_scale's batch sizes where the family's reference draws them from a list (D-FINE's and
  // DEIM's: multiples of 32 within 25% of imgsz, imgsz itself repeated), until the strong
  // augmentations stop (aug_stop_epoch_ratio, no_aug_epochs); an empty list: every batch at imgsz.
  // nullopt: the YOLO heads' range (Ultralytics' 0.5-1.5 x imgsz).
  struct BatchScales {
    std::vector<int> sizes{};
  };
  // Why `size` cannot take square inputs of `image_size` (a DETR selects its queries among the
  // encoder's positions), with what to use instead; "" when it can. Asked before a run starts.
  virtual std::string input_size_obstacle(const std::string& size, int image_size) const {
    (void)size;
    (void)image_size;
    return {};
  }
  virtual std::optional<BatchScales> batch_scales(const std::string& size, int image_size) const {
    (void)size, (void)image_size;
    return std::nullopt;
  }
  // A line for the log about the precision this family trains in, given the resolved amp and
  // whether its dtype is float16 (D-FINE: why AMP is off by default, or a warning about float16's
  // range); `warning`: log it as one. Empty: nothing to say.
  struct PrecisionNote {
    std::string text;
    bool warning = false;
  };
  virtual PrecisionNote precision_note(bool amp, bool float16) const {
    (void)amp, (void)float16;
    return {};
  }
  // Before training (not on resume): fit what the network learns with to the training labels
  // (YOLOv5's AutoAnchor), in place. Returns the line for the log; empty where there is nothing to fit.
  virtual std::string fit_to_labels(torch::nn::Module& model, const data::DetectionDataset& dataset, int image_size,
                                    const config::Config& config) const {
    (void)model, (void)dataset, (void)image_size, (void)config;
    return {};
  }
  // The option defaults of the family's recipe for `size` (where they differ from the table's).
  virtual std::vector<config::OptionDefault> option_defaults(const std::string& size) const = 0;
  // The family's own option keys (its loss gains, its optimizer groups' rates): type, default,
  // range and help. option_table() puts them beside the core keys, tagged with the families that
  // declare them; a key a family does not declare is warned about and left alone in its runs.
  // A family's declared default applies to its models (before option_defaults, which win).
  virtual std::span<const config::OptionSpec> options() const { return {}; }
};

// Throws ModelError for an unknown name.
const Family& family(std::string_view name);
// The defaults a family's model of `size` trains with: the family's declared keys' own defaults
// (Family::options()) where the table's differ, then its recipe's (Family::option_defaults; later
// entries win).
std::vector<config::OptionDefault> recipe_defaults(const Family& family, const std::string& size);
// Every family's recipe defaults, and a size's where they differ from its family's, for --help
// and the man page.
std::vector<config::FamilyDefaults> family_defaults_table();

// The family a resolved configuration trains: its model's, or where the name does not tell, the
// default model's.
const Family& family_of(const config::Config& config);
// The model `model=` names when not given (LibreYOLO's default; lib/models/meson.build), and the
// model the examples in help texts use (the first registered family's first size).
std::string_view default_model();
std::string example_model();
// Every key the commands accept: the core table's and each registered family's own, tagged with
// the families that declare them; `model`'s default and help (the registered names) filled in.
std::span<const config::OptionSpec> option_table();
// `libreyolo <command> --help` and the man page's OPTIONS, from option_table() with the families'
// recipe defaults.
std::string command_help(config::Command command);
std::string man_options();
// Every registered family, in lib/models/meson.build's order (generated: registered_families.cpp).
std::span<const Family* const> families();

}  // namespace libreyolo::models
