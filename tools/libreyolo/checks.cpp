// `libreyolo checks` / `libreyolo version`: what this build has and what the machine shows.
#include "commands.h"
#include "core/system_info.h"
#include "cuda/cuda_selftest.h"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace libreyolo::cli {

int run_checks(const Arguments& arguments) {
  CLI::App app{"Print versions, the CUDA stack, GPUs and CPU threads", "libreyolo checks"};
  bool as_json = false;
  bool selftest = false;
  app.add_flag("--json", as_json, "print one JSON object on stdout");
  app.add_flag("--selftest", selftest, "also run the CUDA self-test (stream, autocast, graph) on cuda:0");
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);  // prints --help, or the parse error
    return code == 0 ? 0 : 2;
  }

  const SystemInfo info = collect_system_info();
  cuda::SelfTestResult test;
  if (selftest) test = cuda::run_selftest(0);
  if (as_json) {
    nlohmann::json out = system_info_json(info);
    if (selftest) {
      out["cuda_selftest"] = {{"ran", test.ran},
                              {"passed", test.passed()},
                              {"stream", test.stream_ok},
                              {"autocast_float16", test.autocast_float16_ok},
                              {"autocast_bfloat16", test.autocast_bfloat16_ok},
                              {"graph", test.graph_ok},
                              {"detail", test.detail}};
    }
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", format_system_info(info));
    if (selftest) {
      fmt::print("CUDA self-test {}{}\n", !test.ran ? "skipped" : (test.passed() ? "passed" : "FAILED"),
                 test.detail.empty() ? "" : fmt::format(" ({})", test.detail));
    }
  }
  return selftest && test.ran && !test.passed() ? 1 : 0;
}

}  // namespace libreyolo::cli
