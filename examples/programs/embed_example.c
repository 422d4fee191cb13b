/* mtlinv from C through the C API: a 4-row gemv under limit 4, row 2 checked against the row alone. */
#include <stdio.h>
#include <string.h>

#include <mtlinv/mtlinv.h>

#define CHECK(call)                                                         \
  do {                                                                      \
    if ((call) != MTLINV_OK) {                                              \
      fprintf(stderr, "%s failed: %s\n", #call, mtlinv_last_error());       \
      return 2;                                                             \
    }                                                                       \
  } while (0)

int main(void) {
  enum { M = 4, K = 300, N = 17 };
  static float x[M * K], w[N * K], y[M * N], y_row[N];
  for (int i = 0; i < M * K; ++i) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < N * K; ++i) w[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;

  char device[128];
  CHECK(mtlinv_device_name(device, sizeof device));
  printf("device: %s\n", device);
  CHECK(mtlinv_set_limit(4, NULL));

  mtlinv_tensor *tx, *tw, *tx_row, *ty, *ty_row;
  const int64_t x_shape[2] = {M, K}, w_shape[2] = {N, K}, row_shape[2] = {1, K};
  CHECK(mtlinv_tensor_from_host(x, x_shape, 2, MTLINV_FLOAT32, &tx));
  CHECK(mtlinv_tensor_from_host(w, w_shape, 2, MTLINV_FLOAT32, &tw));
  CHECK(mtlinv_tensor_from_host(x + 2 * K, row_shape, 2, MTLINV_FLOAT32, &tx_row));
  CHECK(mtlinv_gemv(tx, tw, NULL, 1, &ty));
  CHECK(mtlinv_gemv(tx_row, tw, NULL, 1, &ty_row));
  CHECK(mtlinv_synchronize()); /* on CUDA the gemvs may still be queued; reading below would wait for them too */
  CHECK(mtlinv_tensor_to_host(ty, y, sizeof y));
  CHECK(mtlinv_tensor_to_host(ty_row, y_row, sizeof y_row));
  const int ok = memcmp(y + 2 * N, y_row, sizeof y_row) == 0;
  printf("C API gemv: row 2 %s\n", ok ? "has the bits of the row alone" : "DIFFERS from the row alone");

  /* Errors come back as a status and a message, never as a crash. */
  mtlinv_tensor* bad;
  if (mtlinv_gemv(tx, tw, NULL, 0, &bad) != MTLINV_ERROR_INVALID_ARGUMENT) return 1; /* w as [K, N]: K differs */
  printf("bad input: %s\n", mtlinv_last_error());

  mtlinv_tensor_free(tx);
  mtlinv_tensor_free(tw);
  mtlinv_tensor_free(tx_row);
  mtlinv_tensor_free(ty);
  mtlinv_tensor_free(ty_row);
  return ok ? 0 : 1;
}
