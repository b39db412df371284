#include "core/role_graph.h"

#include <functional>
#include <map>
#include <optional>

namespace torchxd::core {
namespace {

std::string MetaPath(size_t role, std::string_view key) {
  return "roles[" + std::to_string(role) + "].metadata." + std::string(key);
}

tl::unexpected<Error> Bad(const std::string& path, const std::string& what) {
  return Fail(Error::InvalidArgument(path + ": " + what));
}

}  // namespace

bool RoleGraph::Empty() const {
  for (const auto& d : depends_on) {
    if (!d.empty()) return false;
  }
  return true;
}

std::vector<size_t> RoleGraph::StartOrder() const {
  std::vector<size_t> order;
  std::vector<int> mark(depends_on.size(), 0);  // 0 new, 1 visiting, 2 done
  std::function<void(size_t)> visit = [&](size_t r) {
    if (mark[r] != 0) return;
    mark[r] = 1;
    for (size_t d : depends_on[r]) visit(d);
    mark[r] = 2;
    order.push_back(r);
  };
  for (size_t r = 0; r < depends_on.size(); ++r) visit(r);
  return order;
}

Result<RoleGraph> RoleGraphOf(const AppDef& app) {
  RoleGraph g;
  g.depends_on.resize(app.roles.size());
  g.wait_for.assign(app.roles.size(), AppState::kRunning);
  std::map<std::string, size_t> index;
  for (size_t r = 0; r < app.roles.size(); ++r) index.emplace(app.roles[r].name, r);
  for (size_t r = 0; r < app.roles.size(); ++r) {
    const auto& meta = app.roles[r].metadata;
    if (!meta.is_object()) continue;
    auto deps = meta.find(std::string(kDependsOnKey));
    auto state = meta.find(std::string(kDependsOnStateKey));
    if (state != meta.end()) {
      std::string path = MetaPath(r, kDependsOnStateKey);
      if (!state->is_string() || (*state != "RUNNING" && *state != "SUCCEEDED")) {
        return Bad(path, "must be \"RUNNING\" or \"SUCCEEDED\", got " + state->dump());
      }
      if (deps == meta.end()) {
        return Bad(path, "has no effect without " + std::string(kDependsOnKey) + " (the roles to wait for)");
      }
      if (*state == "SUCCEEDED") g.wait_for[r] = AppState::kSucceeded;
    }
    if (deps == meta.end()) continue;
    std::string path = MetaPath(r, kDependsOnKey);
    std::vector<std::string> names;
    if (deps->is_string()) {
      names.push_back(deps->get<std::string>());
    } else if (deps->is_array()) {
      for (const auto& n : *deps) {
        if (!n.is_string()) return Bad(path, "must list role names (strings), got " + n.dump());
        names.push_back(n.get<std::string>());
      }
    } else {
      return Bad(path, "must be a list of role names, got " + deps->dump());
    }
    for (const auto& name : names) {
      auto it = index.find(name);
      if (it == index.end()) {
        std::string known;
        for (const auto& role : app.roles) known += (known.empty() ? "" : ", ") + role.name;
        return Bad(path, "unknown role \"" + name + "\" (the app's roles: " + known + ")");
      }
      if (it->second == r) return Bad(path, "role \"" + name + "\" cannot wait for itself");
      bool seen = false;
      for (size_t d : g.depends_on[r]) seen = seen || d == it->second;
      if (!seen) g.depends_on[r].push_back(it->second);
    }
  }
  // A cycle never starts: name it.
  std::vector<int> mark(app.roles.size(), 0);
  std::vector<size_t> stack;
  std::function<std::optional<std::string>(size_t)> visit = [&](size_t r) -> std::optional<std::string> {
    if (mark[r] == 2) return std::nullopt;
    if (mark[r] == 1) {
      std::string cycle;
      bool in = false;
      for (size_t s : stack) {
        in = in || s == r;
        if (in) cycle += app.roles[s].name + " -> ";
      }
      return cycle + app.roles[r].name;
    }
    mark[r] = 1;
    stack.push_back(r);
    for (size_t d : g.depends_on[r]) {
      if (auto c = visit(d)) return c;
    }
    stack.pop_back();
    mark[r] = 2;
    return std::nullopt;
  };
  for (size_t r = 0; r < app.roles.size(); ++r) {
    if (auto cycle = visit(r)) {
      return Bad(MetaPath(r, kDependsOnKey), "the roles wait for each other in a cycle (" + *cycle +
                                                          "), so none would ever start");
    }
  }
  return g;
}

}  // namespace torchxd::core
