-- memlint's Language Server in Neovim (0.11 or newer): put this in your init.lua, or in
-- ~/.config/nvim/lsp/memlint.lua without the vim.lsp.enable line. Needs
-- `pip install 'memlint-llm[lsp]'` (or a memlint with the lsp extra on PATH).
vim.lsp.config('memlint', {
  cmd = { 'memlint', 'server', '--stdio' },
  filetypes = { 'json', 'jsonc', 'yaml', 'toml', 'sh', 'bash' },
  root_markers = { 'memlint.toml', 'pyproject.toml', '.git' },
  -- scenario keys for every check (like `memlint check --set`); prefer a memlint.toml
  init_options = { set = {}, debounce = 0.3 },
})
vim.lsp.enable('memlint')
