#include "core/step_part.h"

namespace libreyolo {

namespace {
thread_local StepPartListener* listener = nullptr;
}  // namespace

void set_step_part_listener(StepPartListener* l) { listener = l; }
StepPartListener* step_part_listener() { return listener; }

}  // namespace libreyolo
