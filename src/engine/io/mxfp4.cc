// MXFP4 tensors in checkpoints (see mxfp4.h).
#include "engine/io/mxfp4.h"

#include "engine/dtype.h"

namespace air::engine {

Result<Mxfp4Layout> Mxfp4LayoutOf(const Shape& blocks, const Shape& scales,
                                  const std::string& where) {
  const bool ok = blocks.size() == 4 && scales.size() == 3 && blocks[3] == kMxfp4GroupBytes &&
                  blocks[0] == scales[0] && blocks[1] == scales[1] && blocks[2] == scales[2];
  if (!ok) {
    return InvalidArgument(where +
                           ": MXFP4 blocks must be [experts, rows, groups, 16] with scales " +
                           "[experts, rows, groups]; got blocks " + ShapeToString(blocks) +
                           " and scales " + ShapeToString(scales));
  }
  return Mxfp4Layout{blocks[0], blocks[1], blocks[2]};
}

namespace {

// The U8 entry NAME in `reader`, with its file.
Result<const SafetensorsEntry*> FindU8(const WeightReader& reader, const std::string& name,
                                       const SafetensorsFile** file) {
  const SafetensorsEntry* entry = reader.Find(name, file);
  if (entry == nullptr) {
    return NotFound("MXFP4 tensor '" + name + "' is missing from the model weights in " +
                    reader.FileList());
  }
  if (!entry->raw_u8) {
    return InvalidArgument((*file)->path() + ": MXFP4 tensor '" + name + "' must be U8, got " +
                           DTypeName(entry->dtype));
  }
  return entry;
}

}  // namespace

Result<Mxfp4Layout> FindMxfp4(const WeightReader& reader, const std::string& name) {
  const SafetensorsFile* file = nullptr;
  AIR_ASSIGN_OR_RETURN(const SafetensorsEntry* blocks, FindU8(reader, name + "_blocks", &file));
  AIR_ASSIGN_OR_RETURN(const SafetensorsEntry* scales, FindU8(reader, name + "_scales", &file));
  return Mxfp4LayoutOf(blocks->shape, scales->shape, name);
}

Result<Tensor> ReadMxfp4F32(const WeightReader& reader, const std::string& name,
                            Mxfp4Orientation orientation) {
  AIR_ASSIGN_OR_RETURN(Mxfp4Layout layout, FindMxfp4(reader, name));
  const SafetensorsFile* blocks_file = nullptr;
  const SafetensorsFile* scales_file = nullptr;
  const SafetensorsEntry* blocks = reader.Find(name + "_blocks", &blocks_file);
  const SafetensorsEntry* scales = reader.Find(name + "_scales", &scales_file);
  Tensor out(Mxfp4DecodedShape(layout, orientation));
  DequantizeMxfp4F32(layout, blocks_file->RawData(*blocks), scales_file->RawData(*scales),
                     orientation, 0, layout.experts, out.data());
  return out;
}

}  // namespace air::engine
