//! Pooling and normalisation on small tensors, against the independent numpy implementation
//! (`tests/data/embed/reference.py`) and by hand. The model itself is checked against that
//! implementation's sentence vectors in `tests/it/dense.rs`.

use candle_core::{Device, Tensor};

use super::{mean_pool, normalize};

fn close(a: &[Vec<f32>], b: &[Vec<f32>]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.len(), y.len());
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() < 1e-5, "{x:?} != {y:?}");
        }
    }
}

/// The synthetic case of `tests/data/embed/reference.json`: its `pooling` section holds the
/// inputs and what numpy computed from them.
#[test]
fn mean_pooling_skips_padding_and_rows_are_unit_length() {
    let reference: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/data/embed/reference.json")).unwrap();
    let case = &reference["pooling"];
    let rows = |v: &serde_json::Value| -> Vec<Vec<f32>> {
        serde_json::from_value::<Vec<Vec<f64>>>(v.clone())
            .unwrap()
            .into_iter()
            .map(|r| r.into_iter().map(|x| x as f32).collect())
            .collect()
    };
    let dev = Device::Cpu;
    let hidden: Vec<Vec<Vec<f32>>> = serde_json::from_value(case["hidden_states"].clone()).unwrap();
    let hidden = Tensor::new(hidden, &dev).unwrap();
    let mask: Vec<Vec<u32>> = serde_json::from_value(case["attention_mask"].clone()).unwrap();
    let mask = Tensor::new(mask, &dev).unwrap();
    let pooled = mean_pool(&hidden, &mask).unwrap();
    close(
        &pooled.to_vec2::<f32>().unwrap(),
        &rows(&case["mean_pooled"]),
    );
    // By hand: the first row averages two of its three tokens, [1,2] and [3,4].
    close(&pooled.to_vec2::<f32>().unwrap()[..1], &[vec![2.0, 3.0]]);
    let unit = normalize(&pooled).unwrap().to_vec2::<f32>().unwrap();
    close(&unit, &rows(&case["normalized"]));
}

#[test]
fn empty_masks_and_zero_vectors_give_zeros_not_nan() {
    let dev = Device::Cpu;
    let hidden = Tensor::new(&[[[1f32, 2.], [3., 4.]]], &dev).unwrap();
    let mask = Tensor::new(&[[0u32, 0]], &dev).unwrap();
    let pooled = mean_pool(&hidden, &mask).unwrap();
    let unit = normalize(&pooled).unwrap().to_vec2::<f32>().unwrap();
    close(&unit, &[vec![0.0, 0.0]]);
}

#[test]
fn long_texts_are_cut_at_a_character_boundary() {
    use super::cut;
    assert_eq!(cut("short", 8), "short");
    // "é" is two bytes: a cut inside it steps back before it.
    assert_eq!(cut("aé", 2), "a");
    assert_eq!(cut("aéb", 3), "aé");
    let long = "x".repeat(100_000);
    assert_eq!(
        cut(&long, super::MAX_TEXT_BYTES).len(),
        super::MAX_TEXT_BYTES
    );
}
