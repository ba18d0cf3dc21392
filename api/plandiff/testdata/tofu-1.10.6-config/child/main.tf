variable "label" {
  type = string
}
resource "terraform_data" "nested" {
  input = var.label
}
