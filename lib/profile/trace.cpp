#include "profile/trace.h"

#include "core/atomic_file.h"
#include "core/error.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <iterator>

namespace libreyolo::profile {

namespace {

// torch writes numeric pids/tids, some tools write strings ("stream 7"): keep either as a number.
std::int64_t id_of(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number()) {
    const double number = value.get<double>();
    return std::isfinite(number) && std::abs(number) < 9e18 ? static_cast<std::int64_t>(number) : 0;
  }
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    std::int64_t number = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error == std::errc() && end == text.data() + text.size()) return number;
    return static_cast<std::int64_t>(std::hash<std::string>{}(text) & 0x7fffffff);
  }
  return 0;
}

// Trace times are microseconds: a timestamp (since boot or since 1970) below 1e17 (3000 years) and a
// duration below 1e12 (11.6 days). A missing key is 0; anything else is not a trace we can trust.
constexpr double kMaxTimestampUs = 1e17, kMaxDurationUs = 1e12;

double number_of(const nlohmann::json& event, const char* key, double limit, std::size_t index, const std::string& source) {
  const auto found = event.find(key);
  if (found == event.end()) return 0.0;
  if (!found->is_number() || !std::isfinite(found->get<double>()) || found->get<double>() < 0 || found->get<double>() > limit) {
    throw UsageError(fmt::format("{}: event {} (\"{}\"): \"{}\" is {}; expected microseconds from 0 to {:g}", source, index,
                                 event.value("name", ""), key, found->dump(), limit));
  }
  return found->get<double>();
}

}  // namespace

std::int64_t profiler_step_number(const std::string& name) {
  static constexpr std::string_view prefix = "ProfilerStep#";
  if (name.rfind(prefix, 0) != 0) return -1;
  std::int64_t number = -1;
  std::from_chars(name.data() + prefix.size(), name.data() + name.size(), number);
  return number;
}

std::string phase_of_annotation(const std::string& name) {
  return name.rfind("step/", 0) == 0 ? name.substr(5) : std::string();
}

Trace parse_trace(const nlohmann::json& document, const std::string& source_name) {
  const nlohmann::json* events = nullptr;
  if (document.is_object() && document.contains("traceEvents") && document["traceEvents"].is_array()) {
    events = &document["traceEvents"];
  } else if (document.is_array()) {
    events = &document;
  }
  if (!events) {
    throw UsageError(fmt::format("{}: not a Chrome trace (no \"traceEvents\" array); give a profile_trace.json or profile.json",
                                 source_name));
  }
  Trace trace;
  std::map<std::int64_t, Flow> open_flows;
  for (std::size_t index = 0; index < events->size(); ++index) {
    const nlohmann::json& e = (*events)[index];
    if (!e.is_object()) continue;
    for (const char* key : {"ph", "name", "cat"}) {
      if (const auto found = e.find(key); found != e.end() && !found->is_string()) {
        throw UsageError(fmt::format("{}: event {}: \"{}\" is {}; expected a string", source_name, index, key, found->dump()));
      }
    }
    const auto time = [&](const char* key, double limit = kMaxTimestampUs) { return number_of(e, key, limit, index, source_name); };
    const std::string phase = e.value("ph", "");
    const std::int64_t pid = e.contains("pid") ? id_of(e["pid"]) : 0;
    const std::int64_t tid = e.contains("tid") ? id_of(e["tid"]) : 0;
    if (phase == "X") {
      Event event{.name = e.value("name", ""), .category = e.value("cat", ""), .start_us = time("ts"),
                  .duration_us = time("dur", kMaxDurationUs), .pid = pid, .tid = tid};
      if (const auto args = e.find("args"); args != e.end() && args->is_object()) {
        if (const auto c = args->find("correlation"); c != args->end() && c->is_number_integer()) event.correlation = c->get<std::int64_t>();
      }
      trace.events.push_back(std::move(event));
    } else if ((phase == "s" || phase == "f") && e.value("cat", "") == "ac2g" && e.contains("id")) {
      const std::int64_t id = id_of(e["id"]);
      Flow& flow = open_flows[id];
      flow.id = id;
      if (phase == "s") {
        flow.from_us = time("ts"), flow.from_pid = pid, flow.from_tid = tid;
      } else {
        flow.to_us = time("ts"), flow.to_pid = pid, flow.to_tid = tid;
      }
    } else if (phase == "M") {
      // a name that is not text is no name (other tools put numbers there)
      std::string name;
      if (const auto args = e.find("args"); args != e.end() && args->is_object()) {
        if (const auto named = args->find("name"); named != args->end() && named->is_string()) name = named->get<std::string>();
      }
      if (e.value("name", "") == "process_name") trace.process_names[pid] = name;
      if (e.value("name", "") == "thread_name") trace.thread_names[{pid, tid}] = name;
    }
  }
  for (auto& [id, flow] : open_flows) {
    if (flow.from_us > 0 && flow.to_us > 0) trace.flows.push_back(flow);
  }
  if (trace.events.empty()) {  // `[]`, an empty traceEvents, or only metadata: a report of nothing
    throw UsageError(fmt::format("{}: a trace without any complete (\"ph\": \"X\") event, so nothing to analyse; give "
                                 "the profile_trace.json or profile.json of a `libreyolo profile run`",
                                 source_name));
  }
  return trace;
}

std::string read_file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot open the file; give the path of a profile.json or profile_trace.json", path.string()));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

template <typename Json>
Json parse_json_text(const std::string& text, const std::filesystem::path& source) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for a number like 1E613
    throw UsageError(fmt::format("{}: not valid JSON ({})", source.string(), error.what()));
  }
}
template nlohmann::json parse_json_text<nlohmann::json>(const std::string&, const std::filesystem::path&);
template nlohmann::ordered_json parse_json_text<nlohmann::ordered_json>(const std::string&, const std::filesystem::path&);

std::unordered_map<std::int64_t, const Event*> launches_by_correlation(const std::vector<Event>& events) {
  std::unordered_map<std::int64_t, const Event*> launches;
  for (const auto& e : events) {
    if (e.category == category::runtime && e.correlation >= 0) launches[e.correlation] = &e;
  }
  return launches;
}

Trace read_trace(const std::filesystem::path& path) {
  return parse_trace(parse_json_text<nlohmann::json>(read_file_text(path), path), path.string());
}

nlohmann::json trace_to_json(const Trace& trace) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& [pid, name] : trace.process_names) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
  }
  for (const auto& [key, name] : trace.thread_names) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", key.first}, {"tid", key.second}, {"args", {{"name", name}}}});
  }
  for (const auto& e : trace.events) {
    nlohmann::json j = {{"ph", "X"}, {"cat", e.category}, {"name", e.name}, {"pid", e.pid}, {"tid", e.tid},
                        {"ts", e.start_us}, {"dur", e.duration_us}};
    if (e.correlation >= 0) j["args"] = {{"correlation", e.correlation}};
    events.push_back(std::move(j));
  }
  for (const auto& f : trace.flows) {
    events.push_back({{"ph", "s"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", f.id}, {"pid", f.from_pid}, {"tid", f.from_tid}, {"ts", f.from_us}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"cat", "ac2g"}, {"name", "ac2g"}, {"id", f.id}, {"pid", f.to_pid}, {"tid", f.to_tid}, {"ts", f.to_us}});
  }
  return {{"schemaVersion", 1}, {"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
}

void write_trace(const std::filesystem::path& path, const Trace& trace) {
  write_file_atomically(path, trace_to_json(trace).dump());
}

}  // namespace libreyolo::profile
