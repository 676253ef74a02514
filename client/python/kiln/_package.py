"""The files of a package kiln.save writes and kiln.load reads, but the
graph's: package.json's format and weights.bin.
"""
import os


_PACKAGE_FORMAT = "kiln-package-6"
# Formats load() reads: 5 is 6 without "bounds" (no result cut to a count,
# kiln/_data_dependent.py), 4 is 5 without "writes" (no input changed in
# place).
_PACKAGE_FORMATS = ("kiln-package-4", "kiln-package-5", _PACKAGE_FORMAT)


def _weight_names(fn, lifted):
    """For each lifted tensor, the name of the module parameter or buffer it
    is (shares storage with), or None for a constant."""
    if not hasattr(fn, "named_parameters"):
        return [None] * len(lifted)
    import itertools
    by_storage = {(t.data_ptr(), tuple(t.shape)): name for name, t in itertools.chain(
        fn.named_parameters(), fn.named_buffers())}
    return [by_storage.get((t.data_ptr(), tuple(t.shape))) for t in lifted]


def _module_tensor(module, name):
    for part in name.split("."):
        module = getattr(module, part)
    return module.detach()


def _write_weights(lifted, path):
    """The lifted tensors' bytes, one after another at 64-byte offsets, and
    for each where it is: what _read_weights maps back without unpickling
    (torch.load costs a fresh worker milliseconds)."""
    import torch
    layouts, offset = [], 0
    with open(path, "wb") as out:
        for tensor in lifted:
            data = tensor.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
            out.write(bytes(offset - out.tell()))
            out.write(data)
            layouts.append({"dtype": str(tensor.dtype).removeprefix("torch."),
                            "sizes": list(tensor.shape), "strides": list(tensor.stride()),
                            "offset": offset})
            offset = (offset + len(data) + 63) // 64 * 64
    return layouts


def _read_weights(path, layouts):
    import torch
    size = os.path.getsize(path)
    data = bytearray(size)
    with open(path, "rb", buffering=0) as file:
        if file.readinto(data) != size:
            raise ValueError(f"{path}: short read")
    weights = []
    for layout in layouts:
        dtype = getattr(torch, layout["dtype"])
        sizes = layout["sizes"]
        count = 1
        for extent in sizes:
            count *= extent
        if count == 0:
            weights.append(torch.empty(sizes, dtype=dtype))
            continue
        try:
            tensor = torch.frombuffer(data, dtype=dtype, count=count, offset=layout["offset"])
        except ValueError as error:  # past the end of the file
            end = layout["offset"] + count * torch.empty([], dtype=dtype).element_size()
            raise ValueError(f"{path} holds {size} bytes, and weight {len(weights)} "
                             f"({layout['name'] or 'a constant'}) needs bytes up to {end}: "
                             f"the package is damaged; save it again with kiln.save") from error
        tensor = tensor.view(sizes)
        if list(tensor.stride()) != layout["strides"]:
            tensor = torch.empty_strided(sizes, layout["strides"], dtype=dtype).copy_(tensor)
        weights.append(tensor)
    return weights
