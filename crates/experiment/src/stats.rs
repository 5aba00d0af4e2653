//! The few statistics the reports use.

/// The median of `v` (NaN-free input; `None` if empty).
pub fn median(v: &[f64]) -> Option<f64> {
    percentile(v, 50.0)
}

/// The `p`-th percentile of `v` by linear interpolation between order statistics.
pub fn percentile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (s.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    let (a, b) = (s.get(lo)?, s.get(hi)?);
    Some(a + (b - a) * (rank - lo as f64))
}

/// Least-squares line through `pts`: (intercept, slope); `None` with fewer than two
/// distinct x.
pub fn fit_line(pts: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    Some((my - slope * mx, slope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median(&v), Some(2.5));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn a_line_is_recovered() {
        let pts: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 + 0.5 * x as f64)).collect();
        let (a, b) = fit_line(&pts).unwrap();
        assert!((a - 3.0).abs() < 1e-9 && (b - 0.5).abs() < 1e-9);
        assert_eq!(fit_line(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }
}
