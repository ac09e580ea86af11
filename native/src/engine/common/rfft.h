// A real-input FFT of our own (radix-2), shared by the signal-processing engines (the separator, the diarizer).
#pragma once

#include <cmath>
#include <complex>
#include <utility>
#include <vector>

using voxd_cpx = std::complex<float>;

constexpr double voxd_pi = 3.14159265358979323846;

// std::complex's operator* checks for NaN/inf (a libgcc call per product without -ffast-math); the spectra are
// finite, so the plain formula is enough.
inline voxd_cpx voxd_cmul(voxd_cpx a, voxd_cpx b) {
    return { a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real() };
}

// A real-input FFT of size n (a power of two, at least 8): the even and odd samples packed as the real and
// imaginary parts of one complex sequence of n/2, an iterative radix-2 transform of that, then the split step that
// separates the two spectra. Forward is unnormalised; inverse(forward(x)) == x.
class voxd_rfft {
public:
    explicit voxd_rfft(int n) : m_n(n), m_half(n / 2) {
        int bits = 0;
        while ((1 << bits) < m_half) {
            bits++;
        }
        m_rev.resize(m_half);
        for (int i = 0; i < m_half; i++) {
            int r = 0;
            for (int b = 0; b < bits; b++) {
                if (i & (1 << b)) {
                    r |= 1 << (bits - 1 - b);
                }
            }
            m_rev[i] = r;
        }
        // twiddles in double, stored as float: the error then does not grow with the index
        m_twiddle.resize(m_half / 2);
        for (int k = 0; k < m_half / 2; k++) {
            const double a = -2.0 * voxd_pi * k / m_half;
            m_twiddle[k]   = { (float) std::cos(a), (float) std::sin(a) };
        }
        m_split.resize(m_half + 1);
        for (int k = 0; k <= m_half; k++) {
            const double a = -2.0 * voxd_pi * k / m_n;
            m_split[k]     = { (float) std::cos(a), (float) std::sin(a) };
        }
        m_buf.resize(m_half);
    }

    int size() const { return m_n; }

    // `in`: n samples; `out`: n/2 + 1 bins.
    void forward(const float * in, voxd_cpx * out) {
        for (int i = 0; i < m_half; i++) {
            m_buf[i] = { in[2 * i], in[2 * i + 1] };
        }
        transform(false);
        const voxd_cpx z0 = m_buf[0];
        out[0]            = { z0.real() + z0.imag(), 0.0f };
        out[m_half]       = { z0.real() - z0.imag(), 0.0f };
        for (int k = 1; k < m_half; k++) {
            const voxd_cpx zk   = m_buf[k];
            const voxd_cpx zc   = std::conj(m_buf[m_half - k]);
            const voxd_cpx even = 0.5f * (zk + zc);
            const voxd_cpx d    = zk - zc;
            const voxd_cpx odd  = { 0.5f * d.imag(), -0.5f * d.real() }; // d / 2i
            out[k]              = even + voxd_cmul(m_split[k], odd);
        }
    }

    // `in`: n/2 + 1 bins (the imaginary parts of bins 0 and n/2 are ignored); `out`: n samples.
    void inverse(const voxd_cpx * in, float * out) {
        for (int k = 0; k < m_half; k++) {
            const voxd_cpx xk   = in[k];
            const voxd_cpx xc   = std::conj(in[m_half - k]);
            const voxd_cpx even = 0.5f * (xk + xc);
            const voxd_cpx odd  = voxd_cmul(0.5f * (xk - xc), std::conj(m_split[k]));
            m_buf[k]            = { even.real() - odd.imag(), even.imag() + odd.real() }; // even + i odd
        }
        transform(true);
        const float scale = 1.0f / (float) m_half;
        for (int i = 0; i < m_half; i++) {
            out[2 * i]     = m_buf[i].real() * scale;
            out[2 * i + 1] = m_buf[i].imag() * scale;
        }
    }

private:
    void transform(bool inverse) {
        voxd_cpx * a = m_buf.data();
        for (int i = 0; i < m_half; i++) {
            if (i < m_rev[i]) {
                std::swap(a[i], a[m_rev[i]]);
            }
        }
        for (int len = 2; len <= m_half; len <<= 1) {
            const int step = m_half / len;
            const int hl   = len / 2;
            for (int i = 0; i < m_half; i += len) {
                for (int j = 0; j < hl; j++) {
                    voxd_cpx w = m_twiddle[j * step];
                    if (inverse) {
                        w = std::conj(w);
                    }
                    const voxd_cpx u = a[i + j];
                    const voxd_cpx v = voxd_cmul(a[i + j + hl], w);
                    a[i + j]         = u + v;
                    a[i + j + hl]    = u - v;
                }
            }
        }
    }

    int m_n;
    int m_half;
    std::vector<int> m_rev;          // bit reversal of the half-size transform
    std::vector<voxd_cpx> m_twiddle; // exp(-2 pi i k / (n/2)), k < n/4
    std::vector<voxd_cpx> m_split;   // exp(-2 pi i k / n), k <= n/2
    std::vector<voxd_cpx> m_buf;
};
