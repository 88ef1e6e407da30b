// A small well-formedness check for the SVG and HTML the tool writes: every element closed in
// order (HTML's void elements excepted), attribute values quoted, character references known.
// It counts the elements by name, so tests can ask for the ones a chart must have.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace streamspark::test {

struct XmlCheck {
  std::string error;                  // empty when well formed
  std::map<std::string, int> counts;  // elements by name
  std::vector<std::string> classes;   // class="..." values, in order
};

inline XmlCheck check_xml(const std::string& text, bool html = false) {
  static const std::set<std::string> kVoid = {"meta", "br", "hr", "img", "link", "input"};
  static const std::set<std::string> kEntities = {"amp", "lt", "gt", "quot", "apos", "#39"};
  XmlCheck r;
  std::vector<std::string> open;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    r.error = why + " at byte " + std::to_string(i);
    return r;
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '&') {
      const size_t semi = text.find(';', i);
      if (semi == std::string::npos || !kEntities.count(text.substr(i + 1, semi - i - 1))) {
        return fail("an unknown character reference");
      }
      i = semi + 1;
      continue;
    }
    if (c != '<') {
      ++i;
      continue;
    }
    if (text.compare(i, 4, "<!--") == 0) {
      const size_t end = text.find("-->", i);
      if (end == std::string::npos) return fail("an unclosed comment");
      i = end + 3;
      continue;
    }
    if (text.compare(i, 2, "<?") == 0 || text.compare(i, 2, "<!") == 0) {
      const size_t end = text.find('>', i);
      if (end == std::string::npos) return fail("an unclosed declaration");
      i = end + 1;
      continue;
    }
    // A tag: quoted attribute values may hold '>' only escaped, so the first '>' outside quotes
    // ends it.
    size_t j = i + 1;
    bool quoted = false;
    char quote = 0;
    while (j < text.size() && (quoted || text[j] != '>')) {
      if (quoted && text[j] == quote) {
        quoted = false;
      } else if (!quoted && (text[j] == '"' || text[j] == '\'')) {
        quoted = true;
        quote = text[j];
      } else if (!quoted && text[j] == '<') {
        return fail("'<' inside a tag");
      }
      ++j;
    }
    if (j >= text.size()) return fail("an unclosed tag");
    std::string tag = text.substr(i + 1, j - i - 1);
    i = j + 1;
    if (!tag.empty() && tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return fail("</" + name + "> closes nothing open");
      open.pop_back();
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (self_closing) tag.pop_back();
    const std::string name = tag.substr(0, tag.find_first_of(" \t\n"));
    if (name.empty()) return fail("a tag without a name");
    ++r.counts[name];
    // Attributes: name="value" pairs.
    size_t k = name.size();
    while (k < tag.size()) {
      while (k < tag.size() && (tag[k] == ' ' || tag[k] == '\n' || tag[k] == '\t')) ++k;
      if (k >= tag.size()) break;
      const size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() ||
          (tag[eq + 1] != '"' && tag[eq + 1] != '\'')) {
        return fail("an attribute without a quoted value in <" + name + ">");
      }
      const size_t close = tag.find(tag[eq + 1], eq + 2);
      if (close == std::string::npos) return fail("an unterminated attribute in <" + name + ">");
      if (tag.substr(k, eq - k) == "class") r.classes.push_back(tag.substr(eq + 2, close - eq - 2));
      k = close + 1;
    }
    if (!self_closing && !(html && kVoid.count(name))) open.push_back(name);
  }
  if (!open.empty()) {
    r.error = "<" + open.back() + "> never closed";
  }
  return r;
}

}  // namespace streamspark::test
