// tests/json_fields_testing.h: visitors of the field lists that name a
// JSON file's fields once (sdk/ground/json_fields.h has the vocabulary;
// report_fields.h and experiment_fields.h are the lists): the dotted path
// of every field, and a value for every field set apart from its default
// and from the others.
#ifndef TRAINSCOPE_TESTS_JSON_FIELDS_TESTING_H_
#define TRAINSCOPE_TESTS_JSON_FIELDS_TESTING_H_

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "fmt/format.h"

namespace trainscope::testing {

// The dotted path of each field ("phases.<phase>.steps", "slowest[].name").
class FieldPaths {
 public:
  template <typename T>
  void Field(std::string_view key, T&, unsigned) {
    Add(key);
  }
  void WriteOnly(std::string_view key, bool) { Add(key); }
  template <typename Fn>
  void Object(std::string_view key, unsigned, Fn&& fn) {
    Within(key, fn);
  }
  template <typename Fn>
  void ObjectOrNull(std::string_view key, bool, unsigned, Fn&& fn) {
    Within(key, fn);
  }
  template <typename S, typename Fn>
  void Nullable(std::string_view key, std::optional<S>&, Fn&& fn) {
    S s;
    Within(key, [&] { fn(s); });
  }
  template <typename S, typename Fn>
  void Keyed(std::string_view key, std::string_view placeholder, unsigned, std::vector<S>&,
             std::string S::*, Fn&& fn) {
    S s;
    Within(key, [&] { Within(placeholder, [&] { fn(s); }); });
  }
  template <typename S, typename Fn>
  void Array(std::string_view key, std::vector<S>&, Fn&& fn, unsigned = 0) {
    S s;
    Within(std::string(key) + "[]", [&] { fn(s); });
  }
  template <typename T>
  void Strings(std::string_view key, T&, unsigned) {
    Add(key);
  }
  template <typename T>
  void Numbers(std::string_view key, T&, unsigned) {
    Add(key);
  }
  template <typename T>
  void List(std::string_view key, T&, unsigned) {
    Add(key);
  }
  template <typename T>
  void Ints(std::string_view key, T&, unsigned) {
    Add(key);
  }

  std::set<std::string> paths;

 private:
  void Add(std::string_view key) { paths.insert(prefix_ + std::string(key)); }
  template <typename Fn>
  void Within(std::string_view key, Fn&& fn) {
    const size_t size = prefix_.size();
    prefix_ += std::string(key) + ".";
    fn();
    prefix_.resize(size);
  }
  std::string prefix_;
};

// Sets every field apart from its default and from the others: numbers
// in (0, 1) (so that shares stay shares), booleans flipped, two items in
// every list, section and object of pairs.
class FillEveryField {
 public:
  void Field(std::string_view, std::string& v, unsigned) { v = fmt::format("v{}", ++n_); }
  void Field(std::string_view, bool& v, unsigned) { v = !v; }
  void Field(std::string_view, double& v, unsigned) { v = Fraction(); }
  void Field(std::string_view, std::optional<double>& v, unsigned) { v = Fraction(); }
  void Field(std::string_view, std::optional<bool>& v, unsigned) { v = true; }
  void Field(std::string_view, std::optional<std::string>& v, unsigned) {
    v = fmt::format("o{}", ++n_);
  }
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
  void Field(std::string_view, Int& v, unsigned) {
    v = static_cast<Int>(++n_);
  }
  void WriteOnly(std::string_view, bool) {}
  void Check(std::string_view, bool, std::string_view) {}
  template <typename Fn>
  void Object(std::string_view, unsigned, Fn&& fn) {
    fn();
  }
  template <typename Fn>
  void ObjectOrNull(std::string_view, bool, unsigned, Fn&& fn) {
    fn();
  }
  template <typename S, typename Fn>
  void Nullable(std::string_view, std::optional<S>& section, Fn&& fn) {
    fn(section.emplace());
  }
  template <typename S, typename Fn>
  void Keyed(std::string_view, std::string_view, unsigned, std::vector<S>& items,
             std::string S::*name, Fn&& fn) {
    for (int i = 0; i < 2; ++i) {
      S& item = items.emplace_back();
      item.*name = fmt::format("k{}", ++n_);
      fn(item);
    }
  }
  template <typename S, typename Fn>
  void Array(std::string_view, std::vector<S>& items, Fn&& fn, unsigned = 0) {
    for (int i = 0; i < 2; ++i) fn(items.emplace_back());
  }
  void Strings(std::string_view, std::vector<std::pair<std::string, std::string>>& kv, unsigned) {
    kv.clear();
    for (int i = 0; i < 2; ++i) {
      const int n = ++n_;
      kv.emplace_back(fmt::format("k{}", n), fmt::format("v{}", n));
    }
  }
  void Numbers(std::string_view, std::vector<std::pair<std::string, double>>& kv, unsigned) {
    kv.clear();
    for (int i = 0; i < 2; ++i) kv.emplace_back(fmt::format("k{}", ++n_), Fraction());
  }
  void List(std::string_view, std::vector<std::string>& values, unsigned) {
    values = {fmt::format("a{}", ++n_), fmt::format("b{}", n_)};
  }
  void Ints(std::string_view, std::vector<int>& values, unsigned) {
    const int first = ++n_;
    values = {first, ++n_};
  }

 private:
  double Fraction() { return 1.0 / (++n_ + 2); }
  int n_ = 0;
};

}  // namespace trainscope::testing

#endif  // TRAINSCOPE_TESTS_JSON_FIELDS_TESTING_H_
