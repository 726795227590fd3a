#include "core/version.h"

#include "git_revision.h"

namespace libreyolo {

const char* git_revision() { return LIBREYOLO_GIT_REVISION; }

}  // namespace libreyolo
