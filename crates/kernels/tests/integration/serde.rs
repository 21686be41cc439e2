//! Kernels (de)serialise in a fixed format, and deserialisation validates
//! like the constructors.

use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Laplacian, Matern, Polynomial, RationalQuadratic,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// `kernel` written as JSON is `json`, and it comes back identical from
/// JSON and from postcard.
fn round_trips<K>(kernel: K, json: &str)
where
    K: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    assert_eq!(serde_json::to_string(&kernel).unwrap(), json);
    assert_eq!(serde_json::from_str::<K>(json).unwrap(), kernel);
    let bytes = postcard::to_stdvec(&kernel).unwrap();
    assert_eq!(postcard::from_bytes::<K>(&bytes).unwrap(), kernel);
}

#[test]
fn every_kernel_round_trips_in_its_format() {
    round_trips(Gaussian::new(1.5).unwrap(), r#"{"length_scale":1.5}"#);
    round_trips(Laplacian::new(0.25).unwrap(), r#"{"length_scale":0.25}"#);
    round_trips(
        RationalQuadratic::new(2.0, 0.5).unwrap(),
        r#"{"length_scale":2.0,"alpha":0.5}"#,
    );
    round_trips(
        InverseMultiquadric::with_exponent(2.0, 2.0).unwrap(),
        r#"{"length_scale":2.0,"rational_quadratic":{"length_scale":1.0,"alpha":2.0}}"#,
    );
    round_trips(
        Polynomial::new(0.2, 3).unwrap(),
        r#"{"offset":0.2,"degree":3}"#,
    );
    round_trips(
        Matern::new(2.5, 1.0).unwrap(),
        r#"{"nu":2.5,"length_scale":1.0,"form":"FiveHalves"}"#,
    );
    // the Bessel form's constants are recomputed, to the same bits
    for kernel in [
        Matern::new(0.7, 1.3).unwrap(),
        Matern::with_bessel(1.5, 0.4).unwrap(),
        Matern::new(Matern::MAX_NU, 2.0).unwrap(),
    ] {
        let json = serde_json::to_string(&kernel).unwrap();
        assert!(json.contains("Bessel"), "{json}");
        round_trips(kernel, &json);
    }
}

/// The error of deserialising `json` as a `K`: the constructor's message.
fn refused<K: DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
    serde_json::from_str::<K>(json).unwrap_err().to_string()
}

#[test]
fn deserialisation_refuses_what_the_constructors_refuse() {
    // a Matérn order beyond MAX_NU, with the constructor's reason
    let bessel = r#"{"Bessel":{"ln_norm":0.0,"tiny_u":0.0}}"#;
    let message = refused::<Matern>(&format!(
        r#"{{"nu":1e20,"length_scale":1.0,"form":{bessel}}}"#
    ));
    assert!(
        message.contains("`nu`") && message.contains("250"),
        "{message}"
    );
    let message = refused::<Matern>(&format!(
        r#"{{"nu":-1.0,"length_scale":1.0,"form":{bessel}}}"#
    ));
    assert!(message.contains("`nu`"), "{message}");
    let message = refused::<Matern>(r#"{"nu":1.5,"length_scale":1e-200,"form":"ThreeHalves"}"#);
    assert!(message.contains("`length_scale`"), "{message}");
    // a closed form stored with another order
    let message = refused::<Matern>(r#"{"nu":0.7,"length_scale":1.0,"form":"Half"}"#);
    assert!(message.contains("closed form"), "{message}");
    // degrees beyond powi's i32 exponent, and zero
    let message = refused::<Polynomial>(r#"{"offset":1.0,"degree":2147483648}"#);
    assert!(message.contains("`degree`"), "{message}");
    let message = refused::<Polynomial>(r#"{"offset":1.0,"degree":0}"#);
    assert!(message.contains("`degree`"), "{message}");
    let message = refused::<Polynomial>(r#"{"offset":-1.0,"degree":2}"#);
    assert!(message.contains("`offset`"), "{message}");
    for bad in ["-1.0", "0.0", "1e-200", "1e200"] {
        let length_scale = format!(r#"{{"length_scale":{bad}}}"#);
        for message in [
            refused::<Gaussian>(&length_scale),
            refused::<Laplacian>(&length_scale),
            refused::<RationalQuadratic>(&format!(r#"{{"length_scale":{bad},"alpha":1.0}}"#)),
        ] {
            assert!(message.contains("`length_scale`"), "{bad}: {message}");
        }
    }
    let message = refused::<RationalQuadratic>(r#"{"length_scale":1.0,"alpha":-2.0}"#);
    assert!(message.contains("`alpha`"), "{message}");
    let message = refused::<InverseMultiquadric>(
        r#"{"length_scale":-1.0,"rational_quadratic":{"length_scale":1.0,"alpha":0.5}}"#,
    );
    assert!(message.contains("`length_scale`"), "{message}");
    // postcard, the checkpoint format, is checked the same way
    let bytes = postcard::to_stdvec(&-1.0f64).unwrap();
    assert!(postcard::from_bytes::<Gaussian>(&bytes).is_err());
    let mut bytes = postcard::to_stdvec(&Matern::new(0.7, 1.0).unwrap()).unwrap();
    bytes[..8].copy_from_slice(&1e20f64.to_le_bytes());
    assert!(postcard::from_bytes::<Matern>(&bytes).is_err());
}
