//! Log densities from Python: a callable, a pseudo-marginal callable, a
//! compiled C function, a likelihood estimated from a compiled simulator,
//! or a built-in Rust target, all behind [`Target`].

use crate::simulators::SimulationLikelihood;
use kameleon_samplers::{Target, TargetError};
use numpy::{
    PyArray1, PyArrayDescr, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyComplex, PyFloat, PyInt, PyString, PyType};
use rand::Rng;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The signature of a compiled log density: `double logp(const double *x, int64_t dim)`.
pub type CompiledFn = extern "C" fn(*const f64, i64) -> f64;

/// Where a chain's log density comes from.
pub enum Source {
    /// `f(x) -> float` (and for HMC an optional `grad(x) -> array`).
    Callable {
        /// The log density.
        function: Py<PyAny>,
        /// Its gradient, if given.
        gradient: Option<Py<PyAny>>,
    },
    /// `f(x, rng) -> float`, a noisy log-likelihood estimate; `rng` is a
    /// `numpy.random.Generator` seeded from the chain's stream per call.
    PseudoMarginal {
        /// The estimator.
        function: Py<PyAny>,
        /// `numpy.random.PCG64`.
        bit_generator: Py<PyAny>,
        /// `numpy.random.Generator`.
        generator: Py<PyAny>,
    },
    /// `f(xs) -> array` on a `(k, d)` array of k points, returning their k
    /// log densities: chains in lockstep evaluate all their proposed points
    /// of a step in one call ([`Density::evaluate_batch`]); a single point
    /// (a start) is a batch of one.
    Batched {
        /// The vectorised log density.
        function: Py<PyAny>,
    },
    /// A compiled function pointer, called without the GIL.
    Compiled(CompiledFn),
    /// A likelihood estimated in Rust from a compiled simulator, without
    /// the GIL (the whole log density: a flat prior).
    Simulation(SimulationLikelihood),
    /// A built-in Rust target.
    Builtin(Arc<dyn Target>),
}

/// A [`Source`] of known dimension that records the first Python error and
/// turns every later call into a rejection, so a failing run stops quickly.
pub struct Density {
    dim: usize,
    source: Source,
    failed: AtomicBool,
    error: Mutex<Option<PyErr>>,
}

impl Density {
    /// A density of dimension `dim` from `source`.
    pub fn new(dim: usize, source: Source) -> Self {
        Self {
            dim,
            source,
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
        }
    }

    /// Whether evaluating the density needs the GIL (Python callables).
    pub fn needs_gil(&self) -> bool {
        matches!(
            self.source,
            Source::Callable { .. } | Source::PseudoMarginal { .. } | Source::Batched { .. }
        )
    }

    /// Whether evaluations are batched over chains running in lockstep.
    pub fn is_batched(&self) -> bool {
        matches!(self.source, Source::Batched { .. })
    }

    /// The log densities of `count` points (one after the other in
    /// `points`) from one call of the vectorised function; `None` if the
    /// density is not vectorised.
    pub fn evaluate_batch(&self, points: &[f64], count: usize) -> Option<Vec<f64>> {
        match &self.source {
            Source::Batched { function } => Some(self.call_batch(function, points, count)),
            _ => None,
        }
    }

    /// Calls the vectorised `function` on `count` points (a `(count, d)`
    /// array) and returns their log densities; a Python error (or a result
    /// that is not `count` floats) is recorded and gives NaNs.
    fn call_batch(&self, function: &Py<PyAny>, points: &[f64], count: usize) -> Vec<f64> {
        if self.has_failed() {
            return vec![f64::NAN; count];
        }
        Python::attach(|py| {
            let function = function.bind(py);
            let result = PyArray1::from_slice(py, points)
                .reshape([count, self.dim])
                .and_then(|xs| function.call1((xs,)))
                .and_then(|v| read_batch(function, &v, count));
            result.unwrap_or_else(|err| {
                self.fail(err);
                vec![f64::NAN; count]
            })
        })
    }

    /// Whether a Python call (or a compiled simulator) has failed: the run
    /// must stop.
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
            || matches!(&self.source, Source::Simulation(s) if s.has_failed())
    }

    /// The first error raised by the density, if any.
    pub fn take_error(&self) -> Option<PyErr> {
        let error = self.error.lock().unwrap_or_else(|e| e.into_inner()).take();
        match &self.source {
            Source::Simulation(s) => error.or_else(|| s.take_error()),
            _ => error,
        }
    }

    fn fail(&self, err: PyErr) {
        let mut slot = self.error.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(err);
        }
        self.failed.store(true, Ordering::Relaxed);
    }

    /// Calls `function(*args)` and converts the result to a float; a Python
    /// error is recorded and gives NaN (a rejection).
    fn call_scalar<'py>(
        &self,
        function: &Bound<'py, PyAny>,
        args: impl pyo3::call::PyCallArgs<'py>,
    ) -> f64 {
        match function.call1(args).and_then(|v| to_float(function, &v)) {
            Ok(v) => v,
            Err(err) => {
                self.fail(err);
                f64::NAN
            }
        }
    }
}

/// The name a message gives the user's `function`: its `__qualname__`, else
/// its `str()`.
fn function_name(function: &Bound<'_, PyAny>) -> String {
    function
        .getattr("__qualname__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| function.to_string())
}

/// What `value` is, for a message: its type, and its dtype if it has one
/// that the type does not name (``a `ndarray` of dtype bool``).
fn describe(value: &Bound<'_, PyAny>) -> String {
    let kind = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    match value.getattr("dtype").map(|dtype| dtype.to_string()) {
        Ok(dtype) if dtype != kind => format!("a `{kind}` of dtype {dtype}"),
        _ => format!("a `{kind}`"),
    }
}

/// `repr(value)`, cut to about 80 characters, for a message.
fn short_repr(value: &Bound<'_, PyAny>) -> String {
    let repr = value.repr().map(|r| r.to_string()).unwrap_or_default();
    match repr.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &repr[..at]),
        None => repr,
    }
}

/// What the values of a numpy dtype `kind` are, for the kinds that numpy
/// converts to float64 although they are not real numbers (booleans as 0
/// and 1, complex numbers cut to their real part, strings parsed, dates
/// and time spans as counts).
fn not_real_kind(kind: u8) -> Option<&'static str> {
    match kind {
        b'b' => Some("booleans"),
        b'c' => Some("complex numbers"),
        b'U' => Some("strings"),
        b'S' => Some("bytes"),
        b'M' => Some("dates"),
        b'm' => Some("time spans"),
        _ => None,
    }
}

/// Whether `value` has a `dtype` of a kind that is not real numbers (a
/// numpy bool or complex scalar or 0-d array, …).
fn has_not_real_dtype(value: &Bound<'_, PyAny>) -> bool {
    value
        .getattr(intern!(value.py(), "dtype"))
        .is_ok_and(|dtype| {
            dtype
                .cast::<PyArrayDescr>()
                .is_ok_and(|dtype| not_real_kind(dtype.kind()).is_some())
        })
}

/// Whether `value` is a numpy integer or floating-point scalar.
fn is_numpy_real_scalar(value: &Bound<'_, PyAny>) -> bool {
    static FLOATING: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    static INTEGER: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let py = value.py();
    [(&FLOATING, "floating"), (&INTEGER, "integer")]
        .into_iter()
        .any(|(cell, name)| {
            cell.import(py, "numpy", name)
                .is_ok_and(|ty| value.is_instance(ty).unwrap_or(false))
        })
}

/// A log density's value as a float, or `None` if it is not a real number.
/// A Python float (or a subclass, such as numpy's float64) is read as it
/// is: the hot path, one type check. An int (not a bool) or a numpy
/// integer or floating-point scalar is converted. Refused: bools (Python's,
/// an int to Python, and numpy's), complex numbers, strings, bytes, and
/// numpy scalars and 0-d arrays of those kinds (which `float()` reads as
/// 0/1 or the real part, with only a ComplexWarning). Anything else
/// `float()` takes (a 0-d float array, the scalar of another array
/// library) is read as that float.
fn real_float(value: &Bound<'_, PyAny>) -> Option<f64> {
    if let Ok(f) = value.cast::<PyFloat>() {
        return Some(f.value());
    }
    let int = value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>();
    if int || is_numpy_real_scalar(value) {
        return value.extract::<f64>().ok();
    }
    if value.is_instance_of::<PyBool>()
        || value.is_instance_of::<PyComplex>()
        || value.is_instance_of::<PyString>()
        || value.is_instance_of::<PyBytes>()
        || has_not_real_dtype(value)
    {
        return None;
    }
    value.extract::<f64>().ok()
}

/// The value `function` returned as a float (see [`real_float`]); else a
/// `TypeError` naming `function` and what it returned.
fn to_float(function: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    float_of("log density function", function, value)
}

/// The value `function` (`what` it is, for the message) returned as a
/// float (see [`real_float`]); else a `TypeError` naming `function` and
/// what it returned.
fn float_of(what: &str, function: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    real_float(value).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{what} `{}` returned {} ({}); expected a real float (NaN or -inf rejects the point)",
            function_name(function),
            short_repr(value),
            describe(value)
        ))
    })
}

/// The value `function`, a log density (or the part of one `what` names,
/// e.g. "log prior function"), returned as the samplers read it: a float,
/// else the `TypeError` a run raises.
#[pyfunction]
#[pyo3(signature = (function, value, what="log density function"))]
pub fn log_density_value(
    function: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<f64> {
    float_of(what, function, value)
}

/// The `count` values `function`, a vectorized log density, returned as
/// the samplers read them: floats, else the `TypeError` a run raises.
#[pyfunction]
pub fn log_density_values(
    function: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    count: usize,
) -> PyResult<Vec<f64>> {
    read_batch(function, value, count)
}

impl Target for Density {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        match &self.source {
            Source::Builtin(target) => target.log_density(x, rng),
            Source::Compiled(f) => call_compiled(*f, x),
            Source::Simulation(likelihood) => likelihood.log_likelihood_estimate(x, rng),
            Source::Batched { function } => self.call_batch(function, x, 1)[0],
            Source::Callable { function, .. } => {
                if self.has_failed() {
                    return f64::NAN;
                }
                Python::attach(|py| {
                    let array = PyArray1::from_slice(py, x);
                    self.call_scalar(function.bind(py), (array,))
                })
            }
            Source::PseudoMarginal {
                function,
                bit_generator,
                generator,
            } => {
                // One draw from the chain's stream per call, whether or not
                // the run has failed, so the stream's layout is fixed.
                let seed = rng.next_u64();
                if self.has_failed() {
                    return f64::NAN;
                }
                Python::attach(|py| {
                    let array = PyArray1::from_slice(py, x);
                    let generator = bit_generator
                        .bind(py)
                        .call1((seed,))
                        .and_then(|bits| generator.bind(py).call1((bits,)));
                    match generator {
                        Ok(g) => self.call_scalar(function.bind(py), (array, g)),
                        Err(err) => {
                            self.fail(err);
                            f64::NAN
                        }
                    }
                })
            }
        }
    }

    fn is_exact(&self) -> bool {
        match &self.source {
            Source::Builtin(target) => target.is_exact(),
            Source::PseudoMarginal { .. } | Source::Simulation(_) => false,
            Source::Callable { .. } | Source::Batched { .. } | Source::Compiled(_) => true,
        }
    }

    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        match &self.source {
            Source::Builtin(target) => target.grad_log_density(x, out),
            Source::Callable {
                gradient: Some(gradient),
                ..
            } => {
                if self.has_failed() {
                    out.fill(f64::NAN);
                    return Ok(());
                }
                Python::attach(|py| {
                    let result = gradient
                        .bind(py)
                        .call1((PyArray1::from_slice(py, x),))
                        .and_then(|g| read_gradient(gradient.bind(py), &g, out));
                    if let Err(err) = result {
                        self.fail(err);
                        out.fill(f64::NAN);
                    }
                });
                Ok(())
            }
            _ => Err(TargetError::Unsupported("gradient")),
        }
    }
}

/// The `count` log densities returned by a vectorised log density: real
/// floats (see [`real_float`]) in an array (or sequence) of shape
/// `(count,)`, else `TypeError`.
fn read_batch(
    function: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    count: usize,
) -> PyResult<Vec<f64>> {
    // a float64 array, what a numpy density returns, is read as it is
    let array = match value.cast::<numpy::PyArrayDyn<f64>>() {
        Ok(array) if !is_masked(value) => array.clone(),
        _ => real_float_array(value, count).map_err(|held| {
            let got = short_repr(value);
            PyTypeError::new_err(match held {
                Some(held) => format!(
                    "vectorized log density `{}` returned {got}, {held}; expected {count} real \
                     floats (an array of shape ({count},)) for an array of {count} points",
                    function_name(function)
                ),
                None => shape_message(function, count, &got),
            })
        })?,
    };
    if array.ndim() != 1 || array.len() != count {
        return Err(PyTypeError::new_err(shape_message(
            function,
            count,
            &short_repr(value),
        )));
    }
    Ok(array.readonly().as_array().iter().copied().collect())
}

/// The message for a vectorised log density that returned `got`, not
/// `count` floats.
fn shape_message(function: &Bound<'_, PyAny>, count: usize, got: &str) -> String {
    format!(
        "vectorized log density `{}` must return {count} floats (an array of shape ({count},)) \
         for an array of {count} points, got {got}",
        function_name(function)
    )
}

/// `value` as a float64 numpy array of shape `(count,)` if it holds real
/// numbers (as [`real_float`] reads them, for an object array), with NaN
/// at the masked entries of a masked array (numpy would use the values
/// under the mask; NaN rejects, as a masked scalar does); else what it
/// holds that is not, or None if numpy cannot make an array of it or its
/// shape is another.
fn real_float_array<'py>(
    value: &Bound<'py, PyAny>,
    count: usize,
) -> Result<Bound<'py, numpy::PyArrayDyn<f64>>, Option<String>> {
    static GETMASKARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static WHERE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let floats = unmasked_real_floats(value, count)?;
    if !is_masked(value) {
        return Ok(floats);
    }
    let py = value.py();
    GETMASKARRAY
        .import(py, "numpy.ma", "getmaskarray")
        .and_then(|getmaskarray| getmaskarray.call1((value,)))
        .and_then(|mask| {
            WHERE
                .import(py, "numpy", "where")?
                .call1((mask, f64::NAN, floats))
        })
        .and_then(|a| Ok(a.cast_into::<numpy::PyArrayDyn<f64>>()?))
        .map_err(|_| None)
}

/// Whether `value` is a numpy masked array.
fn is_masked(value: &Bound<'_, PyAny>) -> bool {
    static MASKED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    MASKED
        .import(value.py(), "numpy.ma", "MaskedArray")
        .is_ok_and(|ty| value.is_instance(ty).unwrap_or(false))
}

/// [`real_float_array`] without the mask.
fn unmasked_real_floats<'py>(
    value: &Bound<'py, PyAny>,
    count: usize,
) -> Result<Bound<'py, numpy::PyArrayDyn<f64>>, Option<String>> {
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = value.py();
    let array = ASARRAY
        .import(py, "numpy", "asarray")
        .and_then(|asarray| asarray.call1((value,)))
        .map_err(|_| None)?;
    let untyped = array.cast::<PyUntypedArray>().map_err(|_| None)?;
    if untyped.shape() != [count] {
        return Err(None);
    }
    let dtype = untyped.dtype();
    if matches!(dtype.kind(), b'f' | b'i' | b'u') {
        // numpy makes a bool beside numbers in a sequence 0 or 1
        if let Some(item) = bool_item(value) {
            return Err(Some(format!(
                "which holds {} ({}) beside numbers",
                describe(&item),
                short_repr(&item)
            )));
        }
    }
    // a sequence of floats: numpy made a float64 array of it
    if let Ok(floats) = array.cast::<numpy::PyArrayDyn<f64>>() {
        return Ok(floats.clone());
    }
    if let Some(held) = not_real_kind(dtype.kind()) {
        return Err(Some(format!("which holds {held} (dtype {dtype})")));
    }
    if dtype.kind() == b'O' {
        for item in array
            .getattr("flat")
            .and_then(|f| f.try_iter())
            .map_err(|_| None)?
        {
            let item = item.map_err(|_| None)?;
            if real_float(&item).is_none() {
                return Err(Some(format!(
                    "which holds {} ({})",
                    describe(&item),
                    short_repr(&item)
                )));
            }
        }
    }
    array
        .call_method1("astype", (numpy::dtype::<f64>(py),))
        .and_then(|a| Ok(a.cast_into::<numpy::PyArrayDyn<f64>>()?))
        .map_err(|_| None)
}

/// The first item of `value`, a sequence that is not a numpy array, that
/// is a bool (Python's or numpy's, or a 0-d bool array), if any. Floats,
/// what a density returns, are passed over with one type check each.
fn bool_item<'py>(value: &Bound<'py, PyAny>) -> Option<Bound<'py, PyAny>> {
    if value.cast::<PyUntypedArray>().is_ok() {
        return None;
    }
    value.try_iter().ok()?.flatten().find(|item| {
        !item.is_instance_of::<PyFloat>()
            && (item.is_instance_of::<PyBool>() || has_not_real_dtype(item))
    })
}

/// Copies a returned gradient (an array or sequence of d real floats, as
/// [`real_float_array`] reads them) into `out`; else `TypeError`.
fn read_gradient(
    function: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    out: &mut [f64],
) -> PyResult<()> {
    let d = out.len();
    let array = match value.cast::<numpy::PyArrayDyn<f64>>() {
        Ok(array) if array.ndim() == 1 && array.len() == d && !is_masked(value) => array.clone(),
        _ => real_float_array(value, d).map_err(|held| {
            let (name, got) = (function_name(function), short_repr(value));
            PyTypeError::new_err(match held {
                Some(held) => format!(
                    "gradient function `{name}` returned {got}, {held}; expected {d} real floats"
                ),
                None => format!(
                    "gradient function `{name}` must return {d} floats (an array of shape ({d},)), \
                     got {got}"
                ),
            })
        })?,
    };
    out.iter_mut()
        .zip(array.readonly().as_array().iter())
        .for_each(|(o, v)| *o = *v);
    Ok(())
}

/// Calls a compiled log density.
fn call_compiled(f: CompiledFn, x: &[f64]) -> f64 {
    f(x.as_ptr(), x.len() as i64)
}

/// The compiled log density at `address`.
///
/// The caller promises that `address` is a function with the C signature
/// `double logp(const double *x, int64_t dim)` that reads `dim` doubles from
/// `x`, is safe to call concurrently from several threads and touches no
/// Python object; the Python wrapper documents this contract.
pub fn compiled_from_address(address: usize) -> PyResult<CompiledFn> {
    function_at(address, "Compiled")
}

/// The C function at `address` as the function pointer type `F`; `what`
/// names the Python class in the error for a null address.
///
/// The caller promises that `address` is a function of exactly the C
/// signature of `F`, safe to call from several threads at once, that stays
/// alive for the whole run and touches no Python object: the Python class
/// that takes the address documents this contract.
pub(crate) fn function_at<F: Copy>(address: usize, what: &str) -> PyResult<F> {
    if address == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{what}: `address` is a null pointer"
        )));
    }
    assert_eq!(
        std::mem::size_of::<F>(),
        std::mem::size_of::<usize>(),
        "F must be a function pointer type"
    );
    #[allow(unsafe_code)]
    // SAFETY: `F` is a function pointer type (asserted to be pointer-sized;
    // both callers instantiate it with `extern "C" fn` types), the address
    // is non-null and, by the documented contract the user accepts when
    // passing it, points to a thread-safe function with exactly this C
    // signature that stays alive for the whole run (numba keeps its
    // cfunc's code alive as long as the cfunc object, which the Python
    // caller holds).
    let f = unsafe { std::mem::transmute_copy::<usize, F>(&address) };
    Ok(f)
}
