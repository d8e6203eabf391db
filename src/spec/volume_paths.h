// Paths of the seed system's volumes, `/Volumes/<catalog>/<schema>/<volume>/<path...>`
// (docs/volumes.md): parsing and checking one path, and finding the ones a spec's command,
// env_variables and parameters mention, so a bad one is refused at submit with the field that
// holds it.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "spec/workload_spec.h"

namespace air::spec {

inline constexpr char kVolumesPrefix[] = "/Volumes";

// A catalog, schema or volume name: 1-255 of [A-Za-z0-9_-], not starting with '-'.
bool IsValidVolumeName(std::string_view name);

// "/Volumes/a/b/c/x/y" (also "dbfs:/Volumes/...") split into its components {a, b, c, x, y};
// "/Volumes" itself has none. Refused (kInvalidArgument, naming the path and the component):
// another prefix, a "." or ".." component, an invalid catalog/schema/volume name, a NUL byte.
Result<std::vector<std::string>> ParseVolumePath(std::string_view path);

struct VolumeReference {
  std::string field;  // "command", "env_variables.NAME" or "parameters"
  std::string path;   // as written, up to the first shell or YAML delimiter (or a `$`)
};

// Every /Volumes path the spec's command, env_variables values and parameters mention (a
// "/Volumes/" that starts a word: after a start, blank, quote, '=', ':', ',', '(' or '[').
std::vector<VolumeReference> FindVolumeReferences(const WorkloadSpec& spec);

// The references above that are not valid volume paths (ParseVolumePath's error), each with the
// message to show for its field. A path above the volumes (`ls /Volumes/main/default`) is fine.
struct VolumeProblem {
  std::string field;
  std::string message;
};
std::vector<VolumeProblem> CheckVolumeReferences(const WorkloadSpec& spec);

// The /Volumes paths in one text, by the rule above.
std::vector<std::string> FindVolumePaths(std::string_view text);

// Where those paths are in `text`: {offset, length} of each, in order.
struct TextSpan {
  size_t offset = 0;
  size_t length = 0;
};
std::vector<TextSpan> FindVolumePathSpans(std::string_view text);

}  // namespace air::spec
