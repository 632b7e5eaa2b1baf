// chat/json.h: the strict parser, json_quote and to_json.
#include <gtest/gtest.h>
#include "chat/json.h"
