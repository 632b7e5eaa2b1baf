// chat/messages_json.h.
#include <gtest/gtest.h>
#include "chat/messages_json.h"
