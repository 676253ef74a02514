"""Kiln's forms of single ATen ops that torch has no decomposition for, in
ops Kiln compiles (kiln._decompositions adds them to make_fx's table). Each
computes what eager does; single_ops_test checks every one against it."""
import torch


def _embedding_renorm(weight, indices, max_norm, norm_type):
    """The rows of weight that indices name, scaled to norm max_norm where
    theirs is larger (by max_norm / (norm + 1e-7), as eager); the others as
    they are. F.embedding with max_norm makes it."""
    rows = torch.arange(weight.shape[0])
    used = (indices.reshape(-1, 1) == rows).any(0).unsqueeze(1)
    norms = torch.linalg.vector_norm(weight, norm_type, dim=1, keepdim=True)
    scale = torch.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
    return weight * scale.to(weight.dtype)


def _nonzero_static(x, *, size, fill_value=-1):
    """The coordinates of x's first `size` nonzero elements in row-major
    order, one row each, the rows past their count filled with fill_value:
    a size fixed by the caller, so not data-dependent. Row k's flat position
    is how many elements precede the (k+1)-th nonzero."""
    if x.dim() == 0 or x.numel() == 0:
        return torch.full((size, x.dim()), fill_value, dtype=torch.int64)
    nonzero = (x != 0).reshape(-1)
    count = torch.cumsum(nonzero, 0)
    k = torch.arange(1, size + 1).unsqueeze(1)
    position = (count.unsqueeze(0) < k).sum(1)
    found = position < nonzero.shape[0]
    coordinates = []
    stride = x.numel()
    for length in x.shape:
        stride //= length
        coordinates.append(torch.remainder(torch.floor_divide(position, stride), length))
    return torch.where(found.unsqueeze(1), torch.stack(coordinates, 1), fill_value)


def _grid_source_index(coordinates, size, padding_mode, align_corners):
    """A grid's coordinates in [-1, 1] as positions along a dim of `size`,
    with eager's padding: none (0), clamped to the border (1), or reflected
    off the edges (2) and then clamped."""
    if align_corners:
        x = (coordinates + 1) * ((size - 1) / 2)
    else:
        x = ((coordinates + 1) * size - 1) / 2
    if padding_mode == 0:
        return x
    if padding_mode == 2:
        low, span = (0.0, size - 1.0) if align_corners else (-0.5, float(size))
        if span <= 0:
            return torch.zeros_like(x)
        distance = (x - low).abs()
        extra = torch.fmod(distance, span)
        even = torch.remainder(torch.floor(distance / span), 2) == 0
        x = torch.where(even, extra + low, span + low - extra)
    return x.clamp(0, size - 1)


def _grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sample of a volume [N, C, D, H, W] at grid [N, oD, oH, oW, 3]
    (x, y, z in [-1, 1]): trilinear (0) as the 8 corners around each point
    weighted by their distances, or nearest (1), the point rounded half to
    even; corners outside the volume read 0. Each corner is a gather from
    the flattened volume."""
    if interpolation_mode not in (0, 1) or padding_mode not in (0, 1, 2):
        return NotImplemented  # eager's error
    n, c, depth, height, width = input.shape
    points = grid.shape[1:4]
    sizes = (width, height, depth)
    positions = [_grid_source_index(grid[..., i], sizes[i], padding_mode, align_corners)
                 for i in range(3)]
    volume = input.reshape(n, c, depth * height * width)

    def read(corner):
        inside = None
        for coordinate, size in zip(corner, sizes):
            fits = (coordinate >= 0) & (coordinate < size)
            inside = fits if inside is None else inside & fits
        x, y, z = (coordinate.clamp(0, size - 1).to(torch.int64)
                   for coordinate, size in zip(corner, sizes))
        flat = ((z * height + y) * width + x).reshape(n, 1, -1).expand(n, c, -1)
        return torch.gather(volume, 2, flat), inside.reshape(n, 1, -1)

    if interpolation_mode == 1:
        value, inside = read([torch.round(p) for p in positions])
        result = torch.where(inside, value, 0)
    else:
        lows = [torch.floor(p) for p in positions]
        result = 0
        for corner in range(8):
            weight, coordinates = 1, []
            for i, (low, position) in enumerate(zip(lows, positions)):
                above = (corner >> i) & 1
                coordinates.append(low + above)
                weight = weight * (position - low if above else low + 1 - position)
            value, inside = read(coordinates)
            result = result + value * torch.where(inside, weight.reshape(n, 1, -1), 0)
    return result.reshape(n, c, *points)


def _antialias_weights(in_size, out_size, align_corners, scale_factor, dtype):
    """[out_size, in_size]: the weights antialiased bilinear interpolation
    gives each input element of each output element, as eager's: a triangle
    filter as wide as the scale when it shrinks, normalized to sum to 1."""
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    elif scale_factor is not None and scale_factor > 0:
        scale = 1.0 / scale_factor
    else:
        scale = in_size / out_size
    support = scale if scale >= 1.0 else 1.0
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    center = (torch.arange(out_size, dtype=dtype).unsqueeze(1) + 0.5) * scale
    source = torch.arange(in_size, dtype=dtype)
    low = torch.floor(center - support + 0.5).clamp(min=0)
    high = torch.floor(center + support + 0.5).clamp(max=in_size)
    distance = ((source - center + 0.5) * invscale).abs()
    weights = torch.where((source >= low) & (source < high), (1 - distance).clamp(min=0), 0)
    total = weights.sum(1, keepdim=True)
    return torch.where(total != 0, weights / total, weights)


def _upsample_bilinear2d_aa(input, output_size, align_corners, scales_h=None, scales_w=None):
    """Antialiased bilinear resizing (F.interpolate(..., antialias=True)) as
    two matrix products, the width's weights, then the height's."""
    height = _antialias_weights(input.shape[-2], output_size[0], align_corners, scales_h,
                                input.dtype)
    width = _antialias_weights(input.shape[-1], output_size[1], align_corners, scales_w,
                               input.dtype)
    return height @ (input @ width.t())


def _histogramdd_bin_edges(x, bins, *, range=None, weight=None, density=False):
    """Each dim's bins + 1 evenly spaced edges, from range's pair, the
    data's least and greatest values, or [0, 1] for no data (widened by 0.5
    each way where they are equal), spaced as eager's linspace: from the start in the lower
    half, from the end in the upper."""
    points = x.reshape(-1, x.shape[-1])
    edges = []
    for dim, count in enumerate(bins):
        if range is not None:
            low, high = (torch.tensor(float(v), dtype=x.dtype) for v in range[2 * dim:2 * dim + 2])
        elif points.shape[0] == 0:  # numpy's range for no data
            low, high = torch.zeros((), dtype=x.dtype), torch.ones((), dtype=x.dtype)
        else:
            low, high = points[:, dim].amin(), points[:, dim].amax()
        same = low == high
        low, high = torch.where(same, low - 0.5, low), torch.where(same, high + 0.5, high)
        step = (high - low) / count
        i = torch.arange(count + 1, dtype=x.dtype)
        edges.append(torch.where(i < (count + 1) // 2, low + i * step, high - (count - i) * step))
    return edges


def _histogramdd_from_bin_tensors(x, bins, *, weight=None, density=False):
    """The (weighted) count of x's points in each cell of the bins' edges:
    a point's bin along a dim is the last edge at or below it (the last bin
    takes the rightmost edge too); points outside the edges count nowhere.
    density divides by the total and by each cell's size."""
    points = x.reshape(-1, x.shape[-1])
    flat, inside, cells = 0, True, []
    for dim, edges in enumerate(bins):
        value, count = points[:, dim], edges.shape[0] - 1
        below = (edges.unsqueeze(0) <= value.unsqueeze(1)).sum(1) - 1
        position = torch.where(value == edges[-1], count - 1, below)
        inside = inside & (value >= edges[0]) & (value <= edges[-1])
        flat = flat * count + position.clamp(0, max(count - 1, 0))
        cells.append(count)
    weights = torch.ones(points.shape[0], dtype=x.dtype) if weight is None else weight.reshape(-1)
    total = 1
    for count in cells:
        total *= count
    histogram = torch.zeros(total, dtype=x.dtype).index_add(0, torch.where(inside, flat, 0),
                                                            torch.where(inside, weights, 0))
    histogram = histogram.reshape(cells)
    if density:
        histogram = histogram / histogram.sum()
        for dim, edges in enumerate(bins):
            shape = [1] * len(bins)
            shape[dim] = -1
            histogram = histogram / (edges[1:] - edges[:-1]).reshape(shape)
    return histogram


def _histogramdd_from_bin_cts(x, bins, *, range=None, weight=None, density=False):
    edges = _histogramdd_bin_edges(x, bins, range=range)
    return _histogramdd_from_bin_tensors(x, edges, weight=weight, density=density)


def _histogram_bin_ct(x, bins=100, *, range=None, weight=None, density=False):
    """torch.histogram by a bin count: histogramdd's of x's elements as
    points of one dim, with its edges."""
    edges = _histogramdd_bin_edges(x.reshape(-1, 1), [bins], range=range)
    return (_histogramdd_from_bin_tensors(x.reshape(-1, 1), edges, weight=weight,
                                          density=density), edges[0])


def _histogram_bins_tensor(x, bins, *, weight=None, density=False):
    """torch.histogram by edges: histogramdd's of x's elements as points of
    one dim."""
    return (_histogramdd_from_bin_tensors(x.reshape(-1, 1), [bins], weight=weight,
                                          density=density), bins.clone())


aten = torch.ops.aten
DECOMPOSITIONS = {
    aten.embedding_renorm.default: _embedding_renorm,
    aten.nonzero_static.default: _nonzero_static,
    aten.grid_sampler_3d.default: _grid_sampler_3d,
    aten._upsample_bilinear2d_aa.default: _upsample_bilinear2d_aa,
    aten._histogramdd_bin_edges.default: _histogramdd_bin_edges,
    aten._histogramdd_from_bin_cts.default: _histogramdd_from_bin_cts,
    aten._histogramdd_from_bin_tensors.default: _histogramdd_from_bin_tensors,
    aten.histogram.bin_ct: _histogram_bin_ct,
    aten.histogram.bins_tensor: _histogram_bins_tensor,
}
