"""Cost-model parameters: `rules/costmodel/<target>.toml`, validated as data.

A parameter file is governed like every plugin (versioned, pinned in rules/rulebook.lock,
covered by the verifier digest), but it holds no code: the trusted side reads it with
`tomllib` and validates it here, so a proposed parameter file can be judged in the parent
process. Every value carries its `source` and the `date` of that source."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
DATE_RE = re.compile(r"^[0-9]{4}(-[0-9]{2}){0,2}$")
UNCALIBRATED = "uncalibrated (datasheet priors)"

# Device figures (datasheet values). `tensor_peak`: dense 16-bit tensor-core throughput.
DEVICE_KEYS = ("sms", "clock_hz", "hbm_bandwidth", "tensor_peak", "fma_peak", "l2_bytes")
# Model parameters shared by the devices of a target. Efficiencies are fractions of a
# device peak and never exceed 1 (so no prediction can beat the speed-of-light bound).
EFFICIENCIES = ("hbm_efficiency", "wgmma_efficiency", "mma_sync_efficiency",
                "fma_efficiency")
PARAM_KEYS = (
    *EFFICIENCIES,
    "sm_gmem_bytes_per_clk",   # per-SM cap on global<->shared traffic
    "smem_bytes_per_clk",      # shared<->register bandwidth per SM
    "gmem_latency_ns",         # first byte of a global access
    "mbarrier_ns",             # an mbarrier arrive or a satisfied wait
    "named_barrier_ns",        # bar.sync / bar.arrive
    "issue_ns",                # issuing one operation (address math, loop overhead)
    "cta_ns",                  # CTA launch, barrier initialisation, teardown
    "launch_ns",               # kernel launch
    "smem_reserved_bytes",     # shared memory the driver reserves per CTA
    "max_ctas_per_sm",
    "max_threads_per_sm",
)
# What calibration may move (the rest are hardware facts or too weakly observed).
FITTED = ("hbm_efficiency", "wgmma_efficiency", "mma_sync_efficiency", "fma_efficiency",
          "gmem_latency_ns", "launch_ns")
UNITS = ("wgmma", "mma_sync", "fma")


class CostParamError(Exception):
    """A parameter file is malformed; the message names the file and the key."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


@dataclass(frozen=True)
class Value:
    value: float
    unit: str
    source: str
    date: str


@dataclass(frozen=True)
class Device:
    key: str
    name: str
    match: tuple[str, ...]  # substrings of a GPU name (measurement records) that mean it
    values: dict[str, Value]

    def __getitem__(self, key: str) -> float:
        return self.values[key].value


@dataclass(frozen=True)
class CostParams:
    """One target's cost parameters: devices, shared parameters, primitive units."""

    target: str
    version: str
    calibration: str
    default_device: str
    devices: dict[str, Device]
    params: dict[str, Value]
    units: dict[str, str]  # primitive -> "wgmma" | "mma_sync" | "fma"
    fit: dict[str, Any] = field(default_factory=dict)
    relpath: str = ""

    def __getitem__(self, key: str) -> float:
        return self.params[key].value

    @property
    def calibrated(self) -> bool:
        return self.calibration != UNCALIBRATED

    def device(self, key: str | None = None) -> Device:
        key = key or self.default_device
        if key not in self.devices:
            raise CostParamError(self.relpath or self.target, f"no device {key!r}; known: "
                                 f"{', '.join(sorted(self.devices))}")
        return self.devices[key]

    def device_for_gpu(self, gpu_name: str) -> Device | None:
        low = gpu_name.lower()
        for dev in self.devices.values():
            if any(m.lower() in low for m in dev.match):
                return dev
        return None

    def unit_of(self, primitive: str) -> str:
        return self.units.get(primitive, "fma")

    def with_params(self, values: dict[str, float], source: str, date: str) -> CostParams:
        """A copy with some parameter values replaced (calibration, counterfactuals)."""
        params = dict(self.params)
        for key, v in values.items():
            old = params[key]
            params[key] = Value(float(v), old.unit, source, date)
        return CostParams(self.target, self.version, self.calibration, self.default_device,
                          self.devices, params, self.units, self.fit, self.relpath)


def _value(where: str, entry: Any, *, integer: bool = False) -> Value:
    if not isinstance(entry, dict):
        raise CostParamError(where, "must be a table `{ value = .., unit = .., source = .., "
                             "date = .. }`")
    extra = set(entry) - {"value", "unit", "source", "date"}
    if extra:
        raise CostParamError(where, f"unknown field(s) {', '.join(sorted(extra))}")
    v = entry.get("value")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CostParamError(where, "`value` must be a number")
    if not v > 0 or v != v or v == float("inf"):
        raise CostParamError(where, f"`value` must be positive and finite, not {v!r}")
    if integer and int(v) != v:
        raise CostParamError(where, "`value` must be a whole number")
    source, date = entry.get("source"), entry.get("date")
    if not isinstance(source, str) or not source.strip():
        raise CostParamError(where, "needs a `source` (the document or fit it comes from)")
    if not isinstance(date, str) or not DATE_RE.match(date):
        raise CostParamError(where, "needs a `date` (YYYY, YYYY-MM or YYYY-MM-DD)")
    return Value(float(v), str(entry.get("unit", "")), source, date)


def parse_params(data: dict[str, Any], where: str, name: str | None = None) -> CostParams:
    """Validate a parsed parameter file. `name`: the file's stem, which must equal its
    `target`."""
    known = {"version", "target", "calibration", "default_device", "device", "params",
             "units", "fit"}
    extra = set(data) - known
    if extra:
        raise CostParamError(where, f"unknown top-level key(s): {', '.join(sorted(extra))}")
    version = data.get("version")
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise CostParamError(where, "needs `version = \"MAJOR.MINOR.PATCH\"`")
    target = data.get("target")
    if not isinstance(target, str) or (name is not None and target != name):
        raise CostParamError(where, f"`target` must be a string equal to the file name "
                             f"({name!r})")
    calibration = data.get("calibration")
    if not isinstance(calibration, str) or not calibration:
        raise CostParamError(where, f"needs `calibration` ({UNCALIBRATED!r} or a fit)")
    devs = data.get("device")
    if not isinstance(devs, dict) or not devs:
        raise CostParamError(where, "needs at least one [device.<key>] table")
    devices: dict[str, Device] = {}
    for key, table in devs.items():
        at = f"{where}: device.{key}"
        if not isinstance(table, dict):
            raise CostParamError(at, "must be a table")
        dname, match = table.get("name"), table.get("match", [])
        if not isinstance(dname, str) or not dname:
            raise CostParamError(at, "needs a `name`")
        if not isinstance(match, list) or not all(isinstance(m, str) and m for m in match):
            raise CostParamError(at, "`match` must be a list of GPU-name substrings")
        missing = [k for k in DEVICE_KEYS if k not in table]
        if missing:
            raise CostParamError(at, f"missing {', '.join(missing)}")
        extra = set(table) - {"name", "match", *DEVICE_KEYS}
        if extra:
            raise CostParamError(at, f"unknown key(s) {', '.join(sorted(extra))}")
        values = {k: _value(f"{at}.{k}", table[k], integer=k in ("sms", "l2_bytes"))
                  for k in DEVICE_KEYS}
        devices[key] = Device(key, dname, tuple(match), values)
    default = data.get("default_device")
    if default not in devices:
        raise CostParamError(where, f"`default_device` must name a device table, not "
                             f"{default!r}")
    ptable = data.get("params")
    if not isinstance(ptable, dict):
        raise CostParamError(where, "needs a [params] table")
    missing = [k for k in PARAM_KEYS if k not in ptable]
    if missing:
        raise CostParamError(f"{where}: params", f"missing {', '.join(missing)}")
    extra = set(ptable) - set(PARAM_KEYS)
    if extra:
        raise CostParamError(f"{where}: params", f"unknown key(s) {', '.join(sorted(extra))}")
    params = {k: _value(f"{where}: params.{k}", ptable[k],
                        integer=k in ("max_ctas_per_sm", "max_threads_per_sm"))
              for k in PARAM_KEYS}
    for k in EFFICIENCIES:
        if params[k].value > 1:
            raise CostParamError(f"{where}: params.{k}", "an efficiency is a fraction of the "
                                 "peak and cannot exceed 1 (it would beat the "
                                 "speed-of-light bound)")
    units = data.get("units", {})
    if not isinstance(units, dict) or not all(
            isinstance(k, str) and u in UNITS for k, u in units.items()):
        raise CostParamError(f"{where}: units", f"maps primitive names to one of {UNITS}")
    fit = data.get("fit", {})
    if not isinstance(fit, dict):
        raise CostParamError(f"{where}: fit", "must be a table")
    return CostParams(target, version, calibration, default, devices, params, dict(units),
                      fit, where)


# What physics and the datasheets allow each value to be (issue 43): a proposed parameter
# outside its range is a blocker naming the key. Device figures of a device the base also
# describes must stay within DATASHEET_FACTOR of the base's (datasheet) value; a new
# device's within the absolute range. `smem_reserved_bytes` within the target's shared
# memory per SM. Units as in the files.
PHYSICAL: dict[str, tuple[float, float]] = {
    "sms": (1, 1024), "clock_hz": (1e8, 5e9), "hbm_bandwidth": (1e10, 1e14),
    "tensor_peak": (1e12, 1e17), "fma_peak": (1e11, 1e16), "l2_bytes": (1 << 20, 1 << 31),
    **{k: (0.01, 1.0) for k in EFFICIENCIES},
    "sm_gmem_bytes_per_clk": (1, 1024), "smem_bytes_per_clk": (16, 1024),
    "gmem_latency_ns": (50, 5000), "mbarrier_ns": (1, 1000), "named_barrier_ns": (1, 1000),
    "issue_ns": (0.1, 100), "cta_ns": (10, 1e5), "launch_ns": (100, 1e6),
    "smem_reserved_bytes": (0, 1 << 20), "max_ctas_per_sm": (1, 64),
    "max_threads_per_sm": (32, 4096),
}
DATASHEET_FACTOR = 2.0


def physical_problems(params: CostParams, base: CostParams | None = None,
                      smem_per_sm: int | None = None) -> list[tuple[str, str]]:
    """(key, why) for every value outside what physics and the datasheets allow."""
    out: list[tuple[str, str]] = []

    def check(key: str, name: str, value: float, prior: float | None) -> None:
        low, high = PHYSICAL[name]
        if name == "smem_reserved_bytes" and smem_per_sm is not None:
            high = smem_per_sm
        if not low <= value <= high:
            out.append((key, f"{value:g} is outside {low:g}..{high:g}"))
        elif prior is not None and prior > 0 and not (
                prior / DATASHEET_FACTOR <= value <= prior * DATASHEET_FACTOR):
            out.append((key, f"{value:g} is more than {DATASHEET_FACTOR:g}x away from the "
                             f"base's datasheet value {prior:g}"))

    for dkey, device in sorted(params.devices.items()):
        prior_dev = base.devices.get(dkey) if base is not None else None
        for name in DEVICE_KEYS:
            prior = prior_dev.values[name].value if prior_dev is not None else None
            check(f"device.{dkey}.{name}", name, device.values[name].value, prior)
    for name in PARAM_KEYS:
        check(f"params.{name}", name, params.params[name].value, None)
    return out


def with_value(params: CostParams, name: str, value: float) -> CostParams:
    """`params` with device figure or parameter `name` set to `value` everywhere (tests and
    what-if reports)."""
    import dataclasses

    devices = {k: dataclasses.replace(d, values={
        **d.values, **({name: dataclasses.replace(d.values[name], value=value)}
                       if name in d.values else {})}) for k, d in params.devices.items()}
    values = dict(params.params)
    if name in values:
        values[name] = dataclasses.replace(values[name], value=value)
    return dataclasses.replace(params, devices=devices, params=values)


def load_params(path: Path | str) -> CostParams:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CostParamError(str(path), f"cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CostParamError(str(path), f"invalid TOML: {exc}") from None
    return parse_params(data, str(path), path.stem)


def params_for(book: Any, target: str) -> CostParams:
    """The validated parameters of `target` from a loaded rulebook."""
    plugin = book.costmodels.get(target)
    if plugin is None:
        raise CostParamError(f"rules/costmodel/{target}.toml",
                             f"no cost parameters for target {target!r}")
    return parse_params(plugin.data, f"rules/{plugin.relpath}", plugin.name)


# ---- writing (calibration) -----------------------------------------------------------


def _toml_scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(float(f"{v:.6g}"))
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_scalar(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _value_line(key: str, v: Value, integer: bool = False) -> str:
    num: Any = int(v.value) if integer else v.value
    return (f"{key} = {{ value = {_toml_scalar(num)}, unit = {_toml_scalar(v.unit)}, "
            f"source = {_toml_scalar(v.source)}, date = {_toml_scalar(v.date)} }}")


def dump_params(p: CostParams, header: str = "") -> str:
    """A parameter file as TOML text (deterministic; what `parse_params` reads back)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    lines += [f"version = {_toml_scalar(p.version)}", f"target = {_toml_scalar(p.target)}",
              f"calibration = {_toml_scalar(p.calibration)}",
              f"default_device = {_toml_scalar(p.default_device)}", ""]
    for key, dev in p.devices.items():
        lines += [f"[device.{key}]", f"name = {_toml_scalar(dev.name)}",
                  f"match = {_toml_scalar(list(dev.match))}"]
        lines += [_value_line(k, dev.values[k], k in ("sms", "l2_bytes")) for k in DEVICE_KEYS]
        lines.append("")
    lines.append("[params]")
    lines += [_value_line(k, p.params[k], k in ("max_ctas_per_sm", "max_threads_per_sm"))
              for k in PARAM_KEYS]
    lines += ["", "[units]"] + [f"{k} = {_toml_scalar(u)}" for k, u in sorted(p.units.items())]
    if p.fit:
        lines += ["", "[fit]"]
        for k, v in sorted(p.fit.items()):
            lines.append(f"{k} = {_toml_scalar(v)}")
    return "\n".join(lines) + "\n"
