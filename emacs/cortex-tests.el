;;; cortex-tests.el --- ERT tests of cortex.el against a real `cortex lsp'  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run in batch Emacs by tests/scenarios/test_emacs_package.py, with the environment naming a copy
;; of the bundled examples (CORTEX_TEST_ORG), its store (CORTEX_TEST_STORE) and the program
;; (CORTEX_TEST_PROGRAM); the store holds a snapshot and two pending proposals.  Eglot starts
;; `cortex lsp' as `cortex-setup' tells it, for an Org buffer of that folder, which is a working
;; copy under no version control: `cortex-project' makes it the project.

;;; Code:

(require 'cl-lib)
(require 'ert)
(require 'org)
(require 'cortex)

(defvar cortex-tests-org (file-name-as-directory (getenv "CORTEX_TEST_ORG")))

(setq cortex-program (getenv "CORTEX_TEST_PROGRAM")
      cortex-server-arguments (list "lsp" "--store" (getenv "CORTEX_TEST_STORE") "--org" cortex-tests-org)
      eglot-sync-connect t
      eglot-connect-timeout 120)
(cortex-setup)

(defun cortex-tests-open (file)
  "Visit FILE of the folder, with eglot connected to `cortex lsp'."
  (find-file (expand-file-name file cortex-tests-org))
  (unless (eglot-current-server)
    (call-interactively #'eglot))
  (should (eglot-current-server)))

(defun cortex-tests-line ()
  (buffer-substring-no-properties (line-beginning-position) (line-end-position)))

(ert-deftest cortex-tests-definition-follows-an-id-link ()
  (cortex-tests-open "notes/reading.org")
  (goto-char (point-min))
  (search-forward "[[id:proj-memory")
  (xref-find-definitions (xref-backend-identifier-at-point (xref-find-backend)))
  (should (string-suffix-p "notes/projects.org" buffer-file-name))
  (should (string-prefix-p "* Memory store" (cortex-tests-line))))

(ert-deftest cortex-tests-references-are-backlinks ()
  (cortex-tests-open "notes/projects.org")
  (goto-char (point-min))
  (search-forward "* Memory store")
  (let ((found (xref-backend-references 'eglot (xref-backend-identifier-at-point 'eglot))))
    (should (member "notes/reading.org"
                    (mapcar (lambda (item) (file-relative-name (xref-location-group (xref-item-location item))
                                                               cortex-tests-org))
                            found))))
  (xref-find-references (xref-backend-identifier-at-point 'eglot))
  (with-current-buffer "*xref*"
    (should (string-match-p "memory store\\]\\]'s search" (buffer-string)))))

(ert-deftest cortex-tests-search-goes-to-the-hit-picked ()
  (cortex-tests-open "notes/reading.org")
  (let (offered)
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt table &rest _) (car (setq offered (all-completions "" table))))))
      (cortex-search "staging database migration"))
    (should (string-match-p "Staging database migration  notes/projects.org:37\\'" (car offered)))
    (should (> (length offered) 1)))
  (should (string-suffix-p "notes/projects.org" buffer-file-name))
  (should (string-match-p "Staging database migration" (cortex-tests-line)))
  (should-error (cortex-search "   ") :type 'user-error))

(ert-deftest cortex-tests-snapshot-then-log ()
  (cortex-tests-open "notes/projects.org")
  (let ((made (cortex-snapshot "from Emacs")))
    (should (string-match "\\`snapshot \\([0-9a-f]+\\)" made))
    (let ((oid (match-string 1 made)))
      (with-current-buffer (cortex-log)
        (should (string-prefix-p (concat "snapshot " oid) (buffer-string)))
        (should (string-match-p "from Emacs" (buffer-string))))
      (with-temp-buffer
        (should (zerop (call-process cortex-program nil t nil "log" "--store" (getenv "CORTEX_TEST_STORE")
                                     "--org" cortex-tests-org)))
        (should (string-match-p "from Emacs" (buffer-string))))))
  (let ((refused (should-error (cortex--command "cortex.log" "many") :type 'user-error)))
    (should (string-match-p "\\`cortex: cortex.log: .* positive whole number, not 'many'\\'" (cadr refused)))))

(ert-deftest cortex-tests-diff-is-in-diff-mode ()
  (cortex-tests-open "notes/projects.org")
  (goto-char (point-max))
  (insert "* A headline written in Emacs\n")
  (save-buffer)
  (with-current-buffer (cortex-diff)
    (should (derived-mode-p 'diff-mode))
    (should (string-match-p "^\\+\\* A headline written in Emacs" (buffer-string)))))

(ert-deftest cortex-tests-history-of-the-headline-at-point ()
  (cortex-tests-open "notes/projects.org")
  (goto-char (point-min))
  (search-forward "The content-addressed memory")
  (with-current-buffer (call-interactively #'cortex-history)
    (should (derived-mode-p 'diff-mode))
    (should (string-match-p "Memory store" (buffer-string)))))

(ert-deftest cortex-tests-the-working-copy-is-the-project ()
  (let ((project (project-current nil (expand-file-name "notes/" cortex-tests-org))))
    (should (equal (file-name-as-directory (expand-file-name (project-root project)))
                   (expand-file-name cortex-tests-org))))
  (should-not (cortex-project temporary-file-directory)))

(defun cortex-tests-proposal (text)
  "The name of the pending proposal whose patch holds TEXT."
  (let* ((listed (cortex--command "cortex.proposals"))
         (names (cortex--proposal-names listed)))
    (cl-find-if (lambda (name)
                  (let* ((start (string-match (concat "^" (regexp-quote name) " pending ") listed))
                         (next (cl-some (lambda (other)
                                          (string-match (concat "^" (regexp-quote other) " pending ") listed
                                                        (1+ start)))
                                        names)))
                    (string-match-p (regexp-quote text) (substring listed start next))))
                names)))

(defun cortex-tests-review (text choice)
  "Review from Emacs: pick the proposal whose patch holds TEXT, then CHOICE (?a or ?r)."
  (let ((name (cortex-tests-proposal text)))
    (should name)
    (cl-letf (((symbol-function 'completing-read) (lambda (_prompt table &rest _)
                                                    (should (member name (all-completions "" table)))
                                                    name))
              ((symbol-function 'read-multiple-choice) (lambda (_prompt choices) (assq choice choices)))
              ((symbol-function 'read-string) (lambda (&rest _) "not now")))
      (cortex-review))
    (should (string-match-p (regexp-quote text) (with-current-buffer "*cortex proposals*" (buffer-string))))
    (should-not (member name (cortex--proposal-names (cortex--command "cortex.proposals"))))))

(ert-deftest cortex-tests-review-rejects-the-proposal-picked ()
  (cortex-tests-open "notes/projects.org")
  (cortex-tests-review "green tea" ?r)
  (should-not (string-match-p "green tea" (cortex--command "cortex.proposals"))))

(ert-deftest cortex-tests-review-accepts-the-proposal-picked ()
  (cortex-tests-open "notes/projects.org")
  (cortex-tests-review "Reads on Sundays" ?a)
  (with-temp-buffer  ; the Org folder received it
    (insert-file-contents (expand-file-name "agents/assistant/memory.org" cortex-tests-org))
    (should (string-match-p "Reads on Sundays" (buffer-string)))))

(provide 'cortex-tests)
;;; cortex-tests.el ends here
