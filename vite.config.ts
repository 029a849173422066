import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vite';

// The dashboard: a Svelte app built into dist/ui and served by the server process.
export default defineConfig({
  root: 'ui',
  plugins: [svelte()],
  // Relative asset URLs: the server writes a <base> into the page, so the same build serves
  // under any --admin-base-path.
  base: './',
  build: {
    outDir: '../dist/ui',
    emptyOutDir: true,
  },
});
