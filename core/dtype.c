/* Data type sizes and names (ONNX TensorProto.DataType numbering). */
#include <onnxpipe/core.h>

#include <string.h>

size_t pp_dtype_size(pp_dtype dt)
{
    switch (dt) {
    case PP_DTYPE_F32: case PP_DTYPE_I32: case PP_DTYPE_U32: return 4;
    case PP_DTYPE_U8: case PP_DTYPE_I8: case PP_DTYPE_BOOL: return 1;
    case PP_DTYPE_U16: case PP_DTYPE_I16: case PP_DTYPE_F16: case PP_DTYPE_BF16: return 2;
    case PP_DTYPE_I64: case PP_DTYPE_F64: case PP_DTYPE_U64: return 8;
    default: return 0;
    }
}

const char *pp_dtype_name(pp_dtype dt)
{
    switch (dt) {
    case PP_DTYPE_F32: return "float32";
    case PP_DTYPE_U8: return "uint8";
    case PP_DTYPE_I8: return "int8";
    case PP_DTYPE_U16: return "uint16";
    case PP_DTYPE_I16: return "int16";
    case PP_DTYPE_I32: return "int32";
    case PP_DTYPE_I64: return "int64";
    case PP_DTYPE_STRING: return "string";
    case PP_DTYPE_BOOL: return "bool";
    case PP_DTYPE_F16: return "float16";
    case PP_DTYPE_F64: return "float64";
    case PP_DTYPE_U32: return "uint32";
    case PP_DTYPE_U64: return "uint64";
    case PP_DTYPE_BF16: return "bfloat16";
    default: return "undefined";
    }
}

int pp_dtype_is_float(pp_dtype dt)
{
    return dt == PP_DTYPE_F32 || dt == PP_DTYPE_F16 || dt == PP_DTYPE_BF16 || dt == PP_DTYPE_F64;
}

pp_dtype pp_dtype_parse(const char *name)
{
    for (int d = 1; name && d <= PP_DTYPE_BF16; d++)
        if (!strcmp(pp_dtype_name((pp_dtype)d), name)) return (pp_dtype)d;
    return PP_DTYPE_UNDEFINED;
}
