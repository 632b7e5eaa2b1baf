// A reply's logprobs (see logprobs_reply.h).
#include "server/logprobs_reply.h"

#include <charconv>
#include <cmath>

#include "server/api_response.h"

namespace server {
namespace {

// JSON has no -inf: a token the model rules out (a -inf logit) gets -9999, OpenAI's own floor for "never".
std::string number(float logprob) {
  if (!std::isfinite(logprob)) return "-9999.0";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, logprob);  // shortest text that reads back as this float
  std::string out(buf, r.ptr);
  if (out.find_first_of(".e") == std::string::npos) out += ".0";  // a float to typed clients, also when whole
  return out;
}

std::string bytes_json(std::string_view piece) {
  std::string out = "[";
  for (size_t i = 0; i < piece.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(static_cast<unsigned char>(piece[i]));
  }
  return out + "]";
}

}  // namespace

LogprobsReply::LogprobsReply(const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt, Route route)
    : tok_(tok), route_(route), decoder_(tok) {
  for (int32_t id : prompt) decoder_.push(id);  // as the engine does: settles the leading space of the first piece
}

void LogprobsReply::prompt(std::span<const int32_t> ids, std::span<const runtime::TokenLogprobs> lps) {
  tokenizer::StreamDecoder decoder(tok_);
  size_t at = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    Entry e;
    e.in_prompt = true;
    e.scored = i > 0 && i - 1 < lps.size();
    if (e.scored) e.lp = lps[i - 1];
    e.lp.sampled.id = ids[i];
    e.begin = at;
    at += decoder.push(ids[i]).size();
    e.end = at;
    ready_.push_back(std::move(e));
  }
  offset_base_ = at;
}

void LogprobsReply::push(std::span<const runtime::TokenLogprobs> logprobs) {
  for (const runtime::TokenLogprobs& lp : logprobs) {
    Entry e{lp, decoded_, decoded_};
    decoded_ += decoder_.push(lp.sampled.id).size();
    e.end = decoded_;
    pending_.push_back(std::move(e));
  }
}

void LogprobsReply::show(std::string_view text) {
  shown_ += text.size();
  size_t n = 0;
  while (n < pending_.size() && pending_[n].end <= shown_) ++n;
  ready_.insert(ready_.end(), std::make_move_iterator(pending_.begin()),
                std::make_move_iterator(pending_.begin() + static_cast<std::ptrdiff_t>(n)));
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
}

void LogprobsReply::end(bool all) {
  const bool cut = shown_ < decoded_;
  for (Entry& e : pending_)
    if (all || !cut || e.begin < shown_) ready_.push_back(std::move(e));
  pending_.clear();
}

std::string LogprobsReply::take_json() {
  // A token as OpenAI shows it: its own bytes, control tokens by their text ("</s>"); a piece that is part of a
  // UTF-8 character shows U+FFFD in `token` and its true bytes in `bytes`.
  const auto piece = [&](int32_t id) { return tok_.token_to_piece(id, /*render_special=*/true); };
  std::string out;
  if (route_ == Route::Chat) {
    out = "{\"content\":[";
    for (size_t i = 0; i < ready_.size(); ++i) {
      const runtime::TokenLogprobs& lp = ready_[i].lp;
      const std::string p = piece(lp.sampled.id);
      if (i) out += ',';
      out += "{\"token\":" + json_string(p) + ",\"logprob\":" + number(lp.sampled.logprob) +
             ",\"bytes\":" + bytes_json(p) + ",\"top_logprobs\":[";
      for (size_t k = 0; k < lp.top.size(); ++k) {
        const std::string t = piece(lp.top[k].id);
        if (k) out += ',';
        out += "{\"token\":" + json_string(t) + ",\"logprob\":" + number(lp.top[k].logprob) +
               ",\"bytes\":" + bytes_json(t) + "}";
      }
      out += "]}";
    }
    out += "],\"refusal\":null}";
  } else {
    std::string tokens, logprobs, tops, offsets;
    for (size_t i = 0; i < ready_.size(); ++i) {
      const runtime::TokenLogprobs& lp = ready_[i].lp;
      if (i) tokens += ',', logprobs += ',', offsets += ',', tops += ',';
      tokens += json_string(piece(lp.sampled.id));
      // The echoed prompt's entries carry their own offsets; the generated ones count after the prompt's text.
      offsets += std::to_string(ready_[i].begin + (ready_[i].in_prompt ? 0 : offset_base_));
      if (!ready_[i].scored) {  // the prompt's first token: nothing to score it by
        logprobs += "null";
        tops += "null";
        continue;
      }
      logprobs += number(lp.sampled.logprob);
      // {token: logprob} of the n most likely and, as OpenAI always adds it, the sampled token (up to n + 1 keys;
      // two ids that show the same text keep the first, more likely one, since a JSON object's keys are unique).
      std::vector<std::string> keys;
      std::string top = "{";
      const auto add = [&](const runtime::TokenLogprob& t) {
        std::string key = json_string(piece(t.id));
        for (const std::string& k : keys)
          if (k == key) return;
        if (!keys.empty()) top += ',';
        top += key;
        top += ':';
        top += number(t.logprob);
        keys.push_back(std::move(key));
      };
      for (const runtime::TokenLogprob& t : lp.top) add(t);
      add(lp.sampled);
      tops += top;
      tops += '}';
    }
    out = "{\"tokens\":[" + tokens + "],\"token_logprobs\":[" + logprobs + "],\"top_logprobs\":[" + tops +
          "],\"text_offset\":[" + offsets + "]}";
  }
  ready_.clear();
  return out;
}

}  // namespace server
