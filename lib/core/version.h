// Build identity. The git revision lives in its own tiny library so that a new commit (or a
// dirty tree) recompiles one file, not everything behind the precompiled header.
#pragma once

namespace libreyolo {

const char* git_revision();

}  // namespace libreyolo
