// The one place where a run-time weight type becomes a compile-time template parameter. Kernels over weights
// (matvec, dequantize-to-half, get_rows) call dispatch_qtype with a generic lambda taking a QType<T> tag.
#pragma once
#include <string>
#include <type_traits>

#include "quant/types.h"

namespace cuda {

template <quant::Type T>
using QType = ::std::integral_constant<quant::Type, T>;

// Calls f(QType<t>{}) for every type with a device dequantizer; throws quant::UnsupportedType naming `op` otherwise.
template <class F>
void dispatch_qtype(quant::Type t, const char* op, F&& f) {
  using quant::Type;
  switch (t) {
    case Type::F32: f(QType<Type::F32>{}); return;
    case Type::F16: f(QType<Type::F16>{}); return;
    case Type::BF16: f(QType<Type::BF16>{}); return;
    case Type::Q4_0: f(QType<Type::Q4_0>{}); return;
    case Type::Q4_1: f(QType<Type::Q4_1>{}); return;
    case Type::Q5_0: f(QType<Type::Q5_0>{}); return;
    case Type::Q5_1: f(QType<Type::Q5_1>{}); return;
    case Type::Q8_0: f(QType<Type::Q8_0>{}); return;
    case Type::Q2_K: f(QType<Type::Q2_K>{}); return;
    case Type::Q3_K: f(QType<Type::Q3_K>{}); return;
    case Type::Q4_K: f(QType<Type::Q4_K>{}); return;
    case Type::Q5_K: f(QType<Type::Q5_K>{}); return;
    case Type::Q6_K: f(QType<Type::Q6_K>{}); return;
    case Type::MXFP4: f(QType<Type::MXFP4>{}); return;
    default:
      break;
  }
  throw quant::UnsupportedType(::std::string(op) + ": no CUDA kernel for weight type " +
                               quant::type_name(t) + " (id " + ::std::to_string(uint32_t(t)) + ")");
}

}  // namespace cuda
