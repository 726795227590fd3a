// Named parts of a training step that a family's code marks (RT-DETR's matcher, denoising queries
// and loss inside the forward phase) for a step profiler listening on this thread, which times
// them as phases nested in the step's own (parts may nest: each counts its own wall time). One
// thread-local pointer test when nobody listens.
#pragma once

namespace libreyolo {

class StepPartListener {
 public:
  virtual ~StepPartListener() = default;
  virtual void part_start(const char* name) = 0;
  virtual void part_end(const char* name) = 0;
};

// The listener of this thread (nullptr: none).
void set_step_part_listener(StepPartListener* listener);
StepPartListener* step_part_listener();

// Marks a part for its lifetime. `name` must outlive the scope (a string literal).
class StepPart {
 public:
  explicit StepPart(const char* name) : listener_(step_part_listener()), name_(name) {
    if (listener_) listener_->part_start(name_);
  }
  ~StepPart() {
    if (listener_) listener_->part_end(name_);
  }
  StepPart(const StepPart&) = delete;
  StepPart& operator=(const StepPart&) = delete;

 private:
  StepPartListener* listener_;
  const char* name_;
};

}  // namespace libreyolo
