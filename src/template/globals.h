// Global names of the chat-template environment (range, dict, namespace, cycler, joiner,
// raise_exception, strftime_now) and Python's datetime.strftime.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "template/interp.h"

namespace lumen::tpl {

FramePtr make_globals();

// datetime(...).strftime(format) of a naive local time, C locale ("%B" -> "November").
std::string python_strftime(std::string_view format, const std::tm& now);

}  // namespace lumen::tpl
